import { workerData } from "node:worker_threads";
import { reportToParent } from "../../lib/threads.ts";
import { type StageTask, stageSqliteCopy } from "./copy.ts";

// The body of the thread that stages a branch's SQLite copy (see copyWorkspace).
await reportToParent(() => stageSqliteCopy(workerData as StageTask));
