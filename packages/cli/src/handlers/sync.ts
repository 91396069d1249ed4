import type { OperatorSyncState } from "@connector-store/core"
import { Clock, Effect, Option } from "effect"
import { type DatabaseOptions, withStore, withStoreReadOnly } from "../store.js"
import { printable, renderTable } from "../table.js"
import { relativeTime } from "../time.js"
import { output, pageText, quietly } from "../views.js"
import { checkedLimit, nextPageHint, type PageOptions } from "./lists.js"

const iso = (ms: number | null): string | null => ms === null ? null : new Date(ms).toISOString()

/** A sync state as the CLI's JSON shows it: the lease expiry as an ISO time. */
export const syncStateJson = (row: OperatorSyncState) => ({
  ...row,
  leaseExpiresAt: iso(row.leaseExpiresAt)
})

/** The table of a page of sync states. */
export const syncStatesTable = (rows: ReadonlyArray<OperatorSyncState>, now: number): string =>
  renderTable(
    ["CONNECTOR", "OWNER", "STATUS", "LEASE", "LEASE EXPIRES", "ENTITIES", "LAST SYNCED", "VERSION", "ERROR"],
    rows.map((row) => [
      row.connectorName,
      row.ownerDID,
      row.status,
      row.lease,
      relativeTime(row.leaseExpiresAt, now),
      String(row.entityCount),
      row.lastSyncedAt === "" ? "-" : row.lastSyncedAt,
      String(row.version),
      row.error ?? "-"
    ])
  )

/** `sync list`: every sync state, by connector and owner, with where its lease stands. */
export const list = (options: PageOptions & {
  readonly connector: Option.Option<string>
  readonly owner: Option.Option<string>
  readonly lease: Option.Option<"none" | "held" | "stale">
}) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    const page = yield* withStoreReadOnly(options, (store) =>
      quietly(store.listSyncStates({
        connectorName: Option.getOrUndefined(options.connector),
        ownerDID: Option.getOrUndefined(options.owner),
        lease: Option.getOrUndefined(options.lease),
        limit,
        cursor: Option.getOrUndefined(options.cursor)
      })))
    yield* output(
      options.json,
      () => ({ syncStates: page.items.map(syncStateJson), nextCursor: page.nextCursor, corrupt: page.corrupt }),
      () => pageText(page.items, page.corrupt, "no sync states match", (items) => syncStatesTable(items, now))
    )
    if (!options.json) yield* nextPageHint(page.nextCursor)
  })

/** `sync release`: clears the sync lease of a runner that is gone. */
export const release = (options: DatabaseOptions & {
  readonly json: boolean
  readonly connector: string
  readonly owner: string
  readonly force: boolean
}) =>
  Effect.gen(function*() {
    const result = yield* withStore(options, (store) =>
      store.releaseSyncLeaseByOperator(options.connector, options.owner, { force: options.force }))
    const label = printable(`${options.connector}/${options.owner}`)
    yield* output(
      options.json,
      () => ({ ...result, state: syncStateJson(result.state) }),
      () =>
        result.outcome === "released"
          ? `released the ${result.was} sync lease of ${label}: the next claim takes it; its old holder's renewal reports lost`
          : `sync state ${label} holds no lease; nothing changed`
    )
  })
