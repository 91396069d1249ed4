import { type CollectParams, compareCodePoints } from "../operation/retention.js"
import type { RelistRun } from "./RelistRun.js"
import type { SweepCandidate } from "./SweepCandidate.js"

/**
 * The relist retention rule: an ended run (abandoned or superseded) last written before `before` may go with its receipts and
 * candidates; current runs always stay. At most `limit` run ids, oldest first.
 */
export const collectableRelistRuns = (runs: ReadonlyArray<RelistRun>, params: CollectParams): ReadonlyArray<string> =>
  runs
    .filter((run) => (run.state === "abandoned" || run.state === "superseded") && run.updatedAt < params.before)
    .sort((a, b) => a.updatedAt - b.updatedAt || compareCodePoints(a.runID, b.runID))
    .slice(0, params.limit)
    .map((run) => run.runID)

/** True when retention of run `runID` takes this candidate with it: given-up ones stay until a person re-arms them. */
export const isCollectedWithRun = (row: SweepCandidate, runID: string): boolean =>
  row.runID === runID && row.status !== "given_up"
