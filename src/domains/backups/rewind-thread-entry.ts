import { workerData } from "node:worker_threads";
import { reportToParent } from "../../lib/threads.ts";
import { openWorkspaceFile } from "../projects/workspace-db.ts";
import { restoreToInstant, stampHistory } from "./history.ts";
import type { RewindTask } from "./rewind-thread.ts";
import { restoreFromSnapshot } from "./snapshot.ts";

// The body of a SQLite restore's thread (see rewindOnThread): one workspace transaction.
const task = workerData as RewindTask;
await reportToParent(async () => {
  const { db, sqlite } = openWorkspaceFile(task.file, { create: false });
  try {
    if (task.snapshot) sqlite.prepare("attach database ? as snap").run(task.snapshot);
    await db.transaction().execute(async (trx) => {
      await stampHistory(trx, "sqlite");
      if (task.snapshot) {
        await restoreFromSnapshot(trx, "sqlite", "");
      } else {
        await restoreToInstant(trx, "sqlite", task.instant as string);
      }
      await trx.insertInto("events").values(task.events).execute();
    });
  } finally {
    await db.destroy().catch(() => {});
    if (sqlite.open) sqlite.close();
  }
});
