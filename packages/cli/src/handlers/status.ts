import {
  type ConnectorStore,
  type CorruptRowReport,
  formatOperationKey,
  formatWatchIdentity,
  type ReplicationReport,
  type ServerIdentity,
  type StoreDurability,
  type StoreStatus
} from "@connector-store/core"
import { Effect } from "effect"
import { type DatabaseOptions, withStoreReadOnly } from "../store.js"
import { renderFields } from "../table.js"
import { isoTime, relativeTime } from "../time.js"
import { output, quietly } from "../views.js"

const counts = (record: Readonly<Record<string, number>>) =>
  Object.entries(record).map(([key, n]) => `${key} ${n}`).join(", ")

/** How many stored rows of each table cannot be decoded, by table name (tables with none left out). */
export type CorruptCounts = Readonly<Record<string, number>>

/** The largest page the scan for corrupt rows reads. */
const SCAN_PAGE = 500

/**
 * Counts the rows that cannot be decoded in the operation, watch, sync-state
 * and relist-run tables, by reading every page of the operator's lists
 * (each row once; a corrupt row reported on two pages counts once).
 */
export const corruptCountsOf = (store: ConnectorStore["Type"]) =>
  Effect.gen(function*() {
    const keys = new Map<string, Set<string>>()
    const note = (reports: ReadonlyArray<CorruptRowReport>) => {
      for (const report of reports) {
        const seen = keys.get(report.table) ?? new Set<string>()
        seen.add(report.key)
        keys.set(report.table, seen)
      }
    }
    const scan = <E>(
      page: (cursor: string | undefined) => Effect.Effect<{ readonly corrupt: ReadonlyArray<CorruptRowReport>; readonly nextCursor: string | null }, E>
    ) =>
      Effect.iterate({ cursor: undefined as string | undefined, done: false }, {
        while: (at) => !at.done,
        body: (at) =>
          Effect.map(page(at.cursor), (read) => {
            note(read.corrupt)
            return { cursor: read.nextCursor ?? undefined, done: read.nextCursor === null }
          })
      })
    yield* scan((cursor) => store.listOperations({ limit: SCAN_PAGE, cursor }))
    yield* scan((cursor) => store.listWatches({ limit: SCAN_PAGE, cursor }))
    yield* scan((cursor) => store.listSyncStates({ limit: SCAN_PAGE, cursor }))
    yield* scan((cursor) => store.listRelistRuns({ limit: SCAN_PAGE, cursor }))
    return Object.fromEntries(Array.from(keys, ([table, seen]) => [table, seen.size])) as CorruptCounts
  })

const identityText = (identity: ServerIdentity): string =>
  identity.generation !== null
    ? `generation ${identity.generation}`
    : `system ${identity.systemIdentifier ?? "?"}, timeline ${identity.timeline ?? "?"}`

const durabilityText = (durability: StoreDurability): string => {
  const verdict = durability.canLoseAcknowledgedWrites === null
    ? "unknown"
    : durability.canLoseAcknowledgedWrites
    ? "an acknowledged write can be lost on a failover or restore"
    : "no acknowledged write is lost on a failover"
  const detection = durability.detecting ? "" : "; a failover would not be noticed"
  return `${verdict}: ${durability.explanation}${detection}`
}

const replicationText = (replication: ReplicationReport): string => {
  const standbys = replication.standbys.length === 0
    ? "no standby streaming"
    : replication.standbys.map((standby) =>
      `${standby.name} ${standby.syncState} ${standby.state}${standby.replayLagMs === null ? "" : `, replay ${standby.replayLagMs} ms behind`}`
    ).join("; ")
  const names = replication.synchronousStandbyNames === "" ? "none" : replication.synchronousStandbyNames
  return `synchronous_commit ${replication.synchronousCommit}, synchronous standbys ${names}; ${standbys}`
}

const failoverText = (durability: StoreDurability, now: number): string => {
  const failover = durability.failover
  if (failover === null) return "none noticed"
  const window = failover.ended !== null
    ? `window ended by ${failover.ended.by} ${relativeTime(failover.ended.at, now)}`
    : now < failover.until
    ? `claims in doubt until ${isoTime(failover.until)} (${relativeTime(failover.until, now)})`
    : `window over ${relativeTime(failover.until, now)}; rows last written in the ${Math.round((failover.noticedAt - failover.lookbackFrom) / 1000)} s before it stay in doubt until claimed`
  return `noticed ${relativeTime(failover.noticedAt, now)} (${identityText(failover.from)} -> ${identityText(failover.to)}); ${window}; ` +
    `${failover.doubtfulClaims} claim(s) handed out in doubt because of it`
}

/** The status as a person reads it; `corrupt` counts the rows that cannot be decoded, by table. */
export const statusText = (status: StoreStatus, corrupt: CorruptCounts = {}): string => {
  const now = status.at
  const corruptTables = Object.keys(corrupt)
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
    ],
    ["durability", durabilityText(status.durability)],
    ...(status.durability.replication === null ? [] : [["replication", replicationText(status.durability.replication)] as const]),
    ["failover", failoverText(status.durability, now)],
    [
      "rows that cannot be decoded",
      corruptTables.length === 0 ? "none" : `${counts(corrupt)} (see connector-store show, and the operator guide to repair)`
    ]
  ])
}

const statusJson = (status: StoreStatus, corrupt: CorruptCounts) => ({
  ...status,
  corruptRows: corrupt,
  at: isoTime(status.at),
  inFlightRelistRuns: status.relistRuns.started + status.relistRuns.listing,
  oldestDueOperation: status.oldestDueOperation === null
    ? null
    : { ...status.oldestDueOperation, dueAt: isoTime(status.oldestDueOperation.dueAt) },
  oldestDueWatch: status.oldestDueWatch === null ? null : { ...status.oldestDueWatch, dueAt: isoTime(status.oldestDueWatch.dueAt) },
  durability: {
    ...status.durability,
    failover: status.durability.failover === null ? null : {
      ...status.durability.failover,
      noticedAt: isoTime(status.durability.failover.noticedAt),
      until: isoTime(status.durability.failover.until),
      lookbackFrom: isoTime(status.durability.failover.lookbackFrom),
      ended: status.durability.failover.ended === null
        ? null
        : { ...status.durability.failover.ended, at: isoTime(status.durability.failover.ended.at) }
    }
  }
})

/** `status`: counts by table and state, what waits longest, and what needs a person. */
export const status = (options: DatabaseOptions & { readonly json: boolean }) =>
  Effect.flatMap(withStoreReadOnly(options, (store) => quietly(Effect.zip(store.getStoreStatus(), corruptCountsOf(store)))), ([status, corrupt]) =>
    output(options.json, () => statusJson(status, corrupt), () => statusText(status, corrupt)))
