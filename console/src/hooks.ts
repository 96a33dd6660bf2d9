import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { type Problem, problemOf } from "./api.ts";

/** What a screen loaded: its value, or the problem that stopped it, and a way to load it again. */
export interface Loaded<T> {
  value: T | undefined;
  problem: Problem | undefined;
  loading: boolean;
  reload(): void;
}

/** Loads `load()` now and whenever `deps` change; `reload` loads it again (after a change). */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [round, setRound] = useState(0);
  const current = useRef(0);
  useEffect(() => {
    const mine = ++current.current;
    setLoading(true);
    load().then(
      (loaded) => {
        if (mine !== current.current) return;
        setValue(loaded);
        setProblem(undefined);
        setLoading(false);
      },
      (error: unknown) => {
        if (mine !== current.current) return;
        setProblem(problemOf(error));
        setLoading(false);
      },
    );
  }, [...deps, round]);
  const reload = useCallback(() => setRound((n) => n + 1), []);
  return { value, problem, loading, reload };
}

/** An action a person starts (a form, a button): whether it runs, and the problem it met. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const run = useCallback(async (action: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setProblem(undefined);
    try {
      await action();
      return true;
    } catch (error) {
      setProblem(problemOf(error));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, problem, run, clear: () => setProblem(undefined) };
}

/** Calls `tick` every `ms` while `active`. */
export function useInterval(tick: () => void, ms: number, active: boolean): void {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => saved.current(), ms);
    return () => clearInterval(timer);
  }, [ms, active]);
}
