import { formatOperationKey, formatWatchIdentity, type StoreStatus } from "@connector-store/core"
import { Command } from "@effect/cli"
import { Effect } from "effect"
import { databaseOptions, json } from "../options.js"
import { withStoreReadOnly } from "../store.js"
import { renderFields } from "../table.js"
import { isoTime, relativeTime } from "../time.js"
import { output } from "../views.js"

const counts = (record: Readonly<Record<string, number>>) =>
  Object.entries(record).map(([key, n]) => `${key} ${n}`).join(", ")

/** The status as a person reads it. */
export const statusText = (status: StoreStatus): string => {
  const now = status.at
  return renderFields([
    ["at", isoTime(now)],
    ["operations", counts(status.operations)],
    ["watches", counts(status.watches)],
    ["relist runs", counts(status.relistRuns)],
    ["leases held now", String(status.leasesHeld)],
    ["in doubt", String(status.inDoubt)],
    ["repair_failed watches", String(status.watches.repair_failed)],
    ["relist runs in flight", String(status.relistRuns.started + status.relistRuns.listing)],
    ["given-up sweep candidates", String(status.givenUpCandidates)],
    [
      "sync states",
      `${status.syncStates.total}: leases held ${status.syncStates.leasesHeld}, stale ${status.syncStates.staleLeases}`
    ],
    [
      "pending authorizations",
      `live ${status.pendingAuthorizations.live}, expired ${status.pendingAuthorizations.expired}`
    ],
    [
      "oldest due operation",
      status.oldestDueOperation === null
        ? "none"
        : `${formatOperationKey(status.oldestDueOperation)}, due ${relativeTime(status.oldestDueOperation.dueAt, now)}`
    ],
    [
      "oldest due watch",
      status.oldestDueWatch === null
        ? "none"
        : `${formatWatchIdentity(status.oldestDueWatch.identity)}, due ${relativeTime(status.oldestDueWatch.dueAt, now)}`
    ]
  ])
}

const statusJson = (status: StoreStatus) => ({
  ...status,
  at: isoTime(status.at),
  inFlightRelistRuns: status.relistRuns.started + status.relistRuns.listing,
  oldestDueOperation: status.oldestDueOperation === null
    ? null
    : { ...status.oldestDueOperation, dueAt: isoTime(status.oldestDueOperation.dueAt) },
  oldestDueWatch: status.oldestDueWatch === null ? null : { ...status.oldestDueWatch, dueAt: isoTime(status.oldestDueWatch.dueAt) }
})

/** `status`: counts by table and state, what waits longest, and what needs a person. */
export const statusCommand = Command.make("status", { ...databaseOptions, json }, (options) =>
  Effect.flatMap(withStoreReadOnly(options, (store) => store.getStoreStatus()), (status) =>
    output(options.json, () => statusJson(status), () => statusText(status)))
).pipe(Command.withDescription(
  "Counts by table and state, leases held now, operations in doubt, repair_failed watches, relist runs in flight, " +
    "sync leases (held, stale), pending authorizations (live, expired) and the oldest due items (reads only)"
))
