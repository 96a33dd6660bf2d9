/**
 * Per workspace, in this process: writes, and the restores that must have the workspace to
 * themselves while they switch it (see `rewindWorkspace` in backups/service.ts).
 *
 * On SQLite a restore runs on a thread of its own, holding the workspace's write lock; a write
 * of this process on the pool's connection meanwhile would sit in SQLite's busy handler, which
 * sleeps and so blocks the event loop that serves the reads. So writes pass through this gate:
 * a restore waits for the writes under way to finish and holds new ones back (they wait without
 * blocking anything) until it has committed. Reads never pass through it.
 */
interface Gate {
  writers: number;
  /** Settles when the restore holding the gate is done; null when none is. */
  held: Promise<void> | null;
  /** Wakes the restore waiting for the writes under way to finish. */
  drained: (() => void) | null;
}

const gates = new Map<string, Gate>();

function gateOf(workspaceId: string): Gate {
  let gate = gates.get(workspaceId);
  if (!gate) {
    gate = { writers: 0, held: null, drained: null };
    gates.set(workspaceId, gate);
  }
  return gate;
}

function forgetIfIdle(workspaceId: string, gate: Gate): void {
  if (gate.writers === 0 && gate.held === null && gates.get(workspaceId) === gate) gates.delete(workspaceId);
}

/** Runs a write of the workspace once no restore holds it. */
export async function throughGate<T>(workspaceId: string, write: () => Promise<T>): Promise<T> {
  let gate = gateOf(workspaceId);
  while (gate.held) {
    await gate.held;
    gate = gateOf(workspaceId);
  }
  gate.writers++;
  try {
    return await write();
  } finally {
    gate.writers--;
    if (gate.writers === 0) gate.drained?.();
    forgetIfIdle(workspaceId, gate);
  }
}

/** Runs `work` with the workspace's writes held back: after those under way, before any new one. */
export async function holdingWrites<T>(workspaceId: string, work: () => Promise<T>): Promise<T> {
  let gate = gateOf(workspaceId);
  while (gate.held) {
    await gate.held;
    gate = gateOf(workspaceId);
  }
  let release!: () => void;
  gate.held = new Promise<void>((resolve) => {
    release = resolve;
  });
  try {
    if (gate.writers > 0) {
      await new Promise<void>((resolve) => {
        gate.drained = resolve;
      });
      gate.drained = null;
    }
    return await work();
  } finally {
    gate.held = null;
    release();
    forgetIfIdle(workspaceId, gate);
  }
}
