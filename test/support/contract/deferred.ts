import type { ConnectorOperation, ProjectionWatch } from "@connector-store/core"
import { NOW, operationRow, watchRow } from "./fixtures.js"

/** A seeded row, and whether each resume scope should reach it. */
export interface DeferredCase<Row> {
  readonly row: Row
  /** `resumeOfflineDeferred` resumes it. */
  readonly offline: boolean
  /** `resumeAuthDeferred({ ownerDID: "did:owner:1", connectorNames: ["gcal", "jira"] })` resumes it. */
  readonly auth: boolean
}

const later = NOW + 99_999

/**
 * Watches and operations deferred every which way: by reason, owner,
 * connector, and in states a resume must leave alone.
 */
export const deferredRows = (): {
  readonly watches: ReadonlyArray<DeferredCase<ProjectionWatch>>
  readonly operations: ReadonlyArray<DeferredCase<ConnectorOperation>>
} => {
  const watch = (name: string, patch: Partial<ProjectionWatch>) =>
    watchRow({ sourceID: name, documentID: `doc-${name}`, nextAttemptAt: later, ...patch })
  const operation = (name: string, patch: Partial<ConnectorOperation>) =>
    operationRow({ operationID: name, documentID: `doc-${name}`, state: "attempted", nextAttemptAt: later, ...patch })
  return {
    watches: [
      { row: watch("w-offline", { deferReason: "offline" }), offline: true, auth: false },
      { row: watch("w-offline-other-owner", { deferReason: "offline", ownerDID: "did:owner:2" }), offline: true, auth: false },
      { row: watch("w-auth-gcal", { deferReason: "auth" }), offline: false, auth: true },
      { row: watch("w-auth-jira", { deferReason: "auth", connectorName: "jira" }), offline: false, auth: true },
      { row: watch("w-auth-unlisted", { deferReason: "auth", connectorName: "slack" }), offline: false, auth: false },
      { row: watch("w-auth-other-owner", { deferReason: "auth", ownerDID: "did:owner:2" }), offline: false, auth: false },
      { row: watch("w-not-deferred", { deferReason: null }), offline: false, auth: false },
      {
        row: watch("w-verified-offline", { deferReason: "offline", verificationStatus: "verified", nextAttemptAt: null }),
        offline: false,
        auth: false
      },
      { row: watch("w-failed-auth", { deferReason: "auth", verificationStatus: "repair_failed" }), offline: false, auth: false }
    ],
    operations: [
      { row: operation("o-offline", { deferReason: "offline" }), offline: true, auth: false },
      { row: operation("o-offline-other-owner", { deferReason: "offline", ownerDID: "did:owner:2" }), offline: true, auth: false },
      { row: operation("o-auth-gcal", { deferReason: "auth" }), offline: false, auth: true },
      { row: operation("o-auth-jira", { deferReason: "auth", connectorName: "jira" }), offline: false, auth: true },
      { row: operation("o-auth-unlisted", { deferReason: "auth", connectorName: "slack" }), offline: false, auth: false },
      { row: operation("o-auth-other-owner", { deferReason: "auth", ownerDID: "did:owner:2" }), offline: false, auth: false },
      { row: operation("o-not-deferred", { deferReason: null }), offline: false, auth: false },
      { row: operation("o-committed-offline", { deferReason: "offline", state: "committed" }), offline: false, auth: false },
      { row: operation("o-dead-auth", { deferReason: "auth", state: "dead" }), offline: false, auth: false }
    ]
  }
}
