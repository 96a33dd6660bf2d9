import type {
  ButtonHTMLAttributes,
  ComponentChildren,
  InputHTMLAttributes,
  SelectHTMLAttributes,
  TargetedEvent,
} from "preact";
import { useId, useRef, useState } from "preact/hooks";
import type { Problem } from "../api.ts";
import type { Loaded } from "../hooks.ts";

/** A screen: its title, its actions, its content. */
export function Page({
  title,
  actions,
  children,
}: {
  title: string;
  actions?: ComponentChildren;
  children: ComponentChildren;
}) {
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title">{title}</h1>
        {actions ? <div class="actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, "type"> & {
  variant?: "primary" | "danger" | "plain";
  busy?: boolean;
  type?: "button" | "submit";
  disabled?: boolean;
};

export function Button({ variant = "plain", busy = false, type = "button", children, disabled, ...rest }: ButtonProps) {
  return (
    <button {...rest} type={type} class={`button ${variant}`} disabled={disabled || busy} aria-busy={busy}>
      {children}
    </button>
  );
}

/** An API problem, said in full: its message, and where it came from to quote. */
export function ProblemNote({ problem }: { problem: Problem | undefined }) {
  if (!problem) return null;
  return (
    <div class="problem" role="alert">
      <strong>{problem.message}</strong>
      {problem.requestId ? <span class="muted"> (request {problem.requestId})</span> : null}
    </div>
  );
}

interface FieldProps {
  label: string;
  /** The API's name for the field, to show its 422 message. */
  name: string;
  problem?: Problem | undefined;
  hint?: string;
  type?: string;
  value?: string | number;
  required?: boolean;
  minLength?: number;
  maxLength?: number;
  min?: number | string;
  max?: number | string;
  step?: number | string;
  autoComplete?: string;
  placeholder?: string;
  readOnly?: boolean;
  onInput?(event: TargetedEvent<HTMLInputElement, Event>): void;
}

/** A labelled input, with the API's message for it under it. */
export function Field({ label, name, problem, hint, ...input }: FieldProps) {
  const id = useId();
  const error = problem?.fields[name];
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        name={name}
        aria-invalid={error ? true : undefined}
        aria-describedby={error || hint ? `${id}-note` : undefined}
        {...(input as InputHTMLAttributes<HTMLInputElement>)}
      />
      {error || hint ? (
        <div id={`${id}-note`} class={error ? "field-error" : "hint"}>
          {error ?? hint}
        </div>
      ) : null}
    </div>
  );
}

interface SelectProps {
  label: string;
  name: string;
  options: readonly (string | readonly [string, string])[];
  problem?: Problem | undefined;
  value?: string;
  onChange?(event: TargetedEvent<HTMLSelectElement, Event>): void;
}

export function Select({ label, name, options, problem, ...select }: SelectProps) {
  const id = useId();
  const error = problem?.fields[name];
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select
        id={id}
        name={name}
        aria-invalid={error ? true : undefined}
        {...(select as SelectHTMLAttributes<HTMLSelectElement>)}
      >
        {options.map((option) => {
          const [value, text] = typeof option === "string" ? [option, option] : option;
          return (
            <option key={value} value={value}>
              {text}
            </option>
          );
        })}
      </select>
      {error ? <div class="field-error">{error}</div> : null}
    </div>
  );
}

export interface Column<T> {
  header: string;
  cell(row: T): ComponentChildren;
}

/** Rows as a table; `empty` when there are none. */
export function Table<T>({
  rows,
  columns,
  empty,
  label,
}: {
  rows: readonly T[];
  columns: readonly Column<T>[];
  empty: string;
  label: string;
}) {
  if (rows.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col">
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, i) => (
            <tr key={i}>
              {columns.map((column) => (
                <td key={column.header} data-label={column.header}>
                  {column.cell(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

const TONES: Record<string, string> = {
  active: "good",
  completed: "good",
  succeeded: "good",
  paused: "warn",
  provisioning: "busy",
  pending: "busy",
  creating: "busy",
  invited: "busy",
  failed: "bad",
  dead: "bad",
  suspended: "bad",
  expired: "bad",
};

export function Badge({ status }: { status: string }) {
  return <span class={`badge ${TONES[status] ?? "plain"}`}>{status}</span>;
}

/** What a screen loaded: a spinner while it loads, its problem if it failed, else the content. */
export function Loading<T>({ loaded, children }: { loaded: Loaded<T>; children: (value: T) => ComponentChildren }) {
  if (loaded.problem) return <ProblemNote problem={loaded.problem} />;
  if (loaded.value === undefined) {
    return (
      <p class="loading" role="status">
        Loading…
      </p>
    );
  }
  return <>{children(loaded.value)}</>;
}

/** A button that asks first, in a dialog, before a destructive action. */
export function ConfirmButton({
  label,
  question,
  confirm,
  onConfirm,
  variant = "danger",
}: {
  label: string;
  question: string;
  confirm?: string;
  onConfirm(): Promise<unknown> | undefined;
  variant?: "danger" | "primary" | "plain";
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const titleId = useId();
  return (
    <>
      <Button variant={variant} onClick={() => dialog.current?.showModal()}>
        {label}
      </Button>
      <dialog ref={dialog} aria-labelledby={titleId} class="dialog">
        <p id={titleId}>{question}</p>
        <div class="actions">
          <Button onClick={() => dialog.current?.close()}>Cancel</Button>
          <Button
            variant={variant}
            busy={busy}
            onClick={async () => {
              setBusy(true);
              try {
                await onConfirm();
              } finally {
                setBusy(false);
                dialog.current?.close();
              }
            }}
          >
            {confirm ?? label}
          </Button>
        </div>
      </dialog>
    </>
  );
}

/** A secret shown once, with a copy button. */
export function Secret({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  const id = useId();
  return (
    <section class="secret" aria-label={label}>
      <label for={id}>{label}</label>
      <div class="secret-row">
        <input id={id} readOnly value={value} onFocus={(event) => (event.target as HTMLInputElement).select()} />
        <Button
          onClick={async () => {
            await navigator.clipboard?.writeText(value).catch(() => undefined);
            setCopied(true);
          }}
        >
          {copied ? "Copied" : "Copy"}
        </Button>
      </div>
      <p class="hint">Shown once: keep it somewhere safe now.</p>
    </section>
  );
}

/** A date as people read it, in their time zone; `-` for none. */
export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">-</span>;
  const date = new Date(at);
  return <time dateTime={at}>{date.toLocaleString()}</time>;
}

/** A value to put elsewhere (a DNS record, a URL): shown, with a button that copies it. */
export function Copyable({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <span class="copyable">
      <code>{value}</code>
      <Button
        onClick={async () => {
          await navigator.clipboard?.writeText(value).catch(() => undefined);
          setCopied(true);
        }}
      >
        {copied ? "Copied" : "Copy"}
        <span class="visually-hidden"> {label}</span>
      </Button>
    </span>
  );
}
