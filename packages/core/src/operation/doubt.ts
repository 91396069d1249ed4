import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"

/**
 * True while a request of the operation may have landed with no outcome settling it (`inDoubtSince` or `sendMarker`
 * set); only a commit or a settle ends it.
 */
export const isInDoubt = (row: ConnectorOperation): boolean =>
  row.state !== "committed" && (row.inDoubtSince !== null || row.sendMarker !== null)

/** The durable doubt of `row` with its run's marker folded in (kept, or started at `now`), for before the marker is cleared. */
export const foldedDoubt = (row: ConnectorOperation, now: Millis): Millis | null =>
  row.inDoubtSince ?? (row.sendMarker !== null ? now : null)

/** The HTTP statuses whose answer proves the request did not apply: a 4xx (429, 400, 409, 412, …). */
export const provesNotApplied = (httpStatus: number | null | undefined): boolean =>
  httpStatus !== null && httpStatus !== undefined && httpStatus >= 400 && httpStatus <= 499
