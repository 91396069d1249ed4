import { type CollectParams, compareCodePoints } from "../operation/retention.js"
import type { RelistRun } from "./RelistRun.js"
import type { SweepCandidate } from "./SweepCandidate.js"

/**
 * The relist retention rule, over every run: a run that ended (abandoned or
 * superseded) and was last written strictly before `before` may go, with
 * its receipts and its candidates. A scope's current run (listing, or
 * complete) always stays, however old: it is the resume point or the one
 * behind the candidates.
 *
 * Returns at most `limit` run ids, oldest `updatedAt` first (ties by id).
 */
export const collectableRelistRuns = (runs: ReadonlyArray<RelistRun>, params: CollectParams): ReadonlyArray<string> =>
  runs
    .filter((run) => (run.state === "abandoned" || run.state === "superseded") && run.updatedAt < params.before)
    .sort((a, b) => a.updatedAt - b.updatedAt || compareCodePoints(a.runID, b.runID))
    .slice(0, params.limit)
    .map((run) => run.runID)

/**
 * True when retention of run `runID` takes this candidate with it. Given-up
 * candidates stay, whatever run derived them: they are reported until a
 * person re-arms them.
 */
export const isCollectedWithRun = (row: SweepCandidate, runID: string): boolean =>
  row.runID === runID && row.status !== "given_up"
