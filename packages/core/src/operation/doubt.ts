import type { Millis } from "../watch/ProjectionWatch.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"

/**
 * True while a request of the operation may have landed at the provider and
 * no outcome settled it: an earlier request was recorded as possibly landed
 * (`inDoubtSince`), or the current run's counted request may be in flight
 * (`sendMarker`). A committed operation is never in doubt (its marker names
 * the run that committed it). Nothing but a commit, or a settle by a
 * reconcile, makes an operation in doubt stop being so: no takeover,
 * deferral, later failure or run that dies before sending.
 */
export const isInDoubt = (row: ConnectorOperation): boolean =>
  row.state !== "committed" && (row.inDoubtSince !== null || row.sendMarker !== null)

/**
 * The durable doubt of `row` once its current run's marker is folded in: an
 * existing `inDoubtSince` is kept (the first request in doubt dates it); a
 * marker without one starts it at `now`. Used whenever the run's marker is
 * about to be cleared, so that clearing it never clears the fact.
 */
export const foldedDoubt = (row: ConnectorOperation, now: Millis): Millis | null =>
  row.inDoubtSince ?? (row.sendMarker !== null ? now : null)

/** The HTTP statuses whose answer proves the request did not apply: a 4xx (429, 400, 409, 412, …). */
export const provesNotApplied = (httpStatus: number | null | undefined): boolean =>
  httpStatus !== null && httpStatus !== undefined && httpStatus >= 400 && httpStatus <= 499
