import type { Millis } from "../watch/ProjectionWatch.js"
import { resumeReaches, type ResumeScope } from "../watch/transitions.js"
import type { ConnectorOperation } from "./ConnectorOperation.js"
import { bump } from "../versioned.js"

/** Makes an attempted operation deferred within `scope` due now, reason cleared, no attempt spent; any other row is `undefined`. */
export const resumeDeferredOperation = (
  row: ConnectorOperation,
  scope: ResumeScope,
  now: Millis
): ConnectorOperation | undefined =>
  row.state === "attempted" && resumeReaches(scope, row)
    ? bump(row, now, { nextAttemptAt: now, deferReason: null })
    : undefined
