import type { CommandUnknownOpts } from "@commander-js/extra-typings";
import { UsageError } from "../errors.ts";
import type { Program } from "./shared.ts";

/** The candidates for the word being typed, after `words` (the command line past `plinth`, the last one partial). */
export function completionsFor(program: CommandUnknownOpts, words: string[]): string[] {
  const typed = words.at(-1) ?? "";
  let command = program;
  for (const word of words.slice(0, -1)) {
    const next = command.commands.find((candidate) => candidate.name() === word);
    if (next) command = next;
  }
  if (typed.startsWith("-")) {
    const options = [...command.options, ...(command === program ? [] : program.options)];
    return options
      .flatMap((option) => [option.long, option.short])
      .filter((flag): flag is string => Boolean(flag?.startsWith(typed)));
  }
  return command.commands
    .filter((candidate) => !(candidate as unknown as { _hidden?: boolean })._hidden)
    .map((candidate) => candidate.name())
    .filter((name) => name.startsWith(typed));
}

const SCRIPTS: Record<string, string> = {
  bash: `# plinth completion for bash: eval "$(plinth completion bash)" in ~/.bashrc
_plinth() {
  local IFS=$'\\n'
  COMPREPLY=($(plinth __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _plinth plinth
`,
  zsh: `#compdef plinth
# plinth completion for zsh: eval "$(plinth completion zsh)" in ~/.zshrc
_plinth() {
  local -a candidates
  candidates=("\${(@f)$(plinth __complete "\${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -a candidates
}
compdef _plinth plinth
`,
  fish: `# plinth completion for fish: plinth completion fish > ~/.config/fish/completions/plinth.fish
complete -c plinth -f -a '(plinth __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`,
};

/** `completion bash|zsh|fish` prints the shell's script; `__complete` (hidden) answers it. */
export function completionCommands(program: Program): void {
  program
    .command("completion")
    .description("print the shell completion script: bash, zsh or fish")
    .argument("<shell>", "bash, zsh or fish")
    .action((shell) => {
      const script = SCRIPTS[shell];
      if (!script) throw new UsageError(`no completion for ${shell}: bash, zsh or fish`);
      process.stdout.write(script);
    });
  program
    .command("__complete", { hidden: true })
    .argument("[words...]")
    .allowUnknownOption()
    .action((words) => {
      const candidates = completionsFor(program, words.length > 0 ? words : [""]);
      if (candidates.length > 0) process.stdout.write(`${candidates.join("\n")}\n`);
    });
}
