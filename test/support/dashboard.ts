import { OperationRepository, type PromiseConnectorStore, WatchRepository } from "@connector-store/core"
import { Effect } from "effect"
import { operationRow, watchRow } from "./contract/fixtures.js"

/** Text a page must show as text and never run or parse as markup. */
export const HOSTILE = `<script>window.__pwned=1</script>"'><img src=x onerror="window.__pwned=2">`

/** A lease token the pages must never show. */
export const SECRET_LEASE = "SECRET-LEASE-TOKEN-7f3a"

/** The rows the dashboard tests look at, written through the store's ports as the fixtures write them. */
export const DASHBOARD_ROWS = {
  dead: { callerDID: "did:caller:1", operationID: "op-dead" },
  dead2: { callerDID: "did:caller:2", operationID: "op-dead-2" },
  unsettled: { callerDID: "did:caller:1", operationID: "op-unsettled" },
  hostile: { callerDID: "did:caller:1", operationID: `op-${HOSTILE}` },
  watch: { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1", sourceID: "src-watch" }
} as const

/** Writes the dashboard tests' rows: dead, unsettled, hostile and leased operations, 60 committed ones, a repair_failed watch. */
export const seedDashboardRows = (store: Pick<PromiseConnectorStore<unknown>, "runEffect" | "setSyncState">, now: number) =>
  store.runEffect(Effect.gen(function*() {
    const operations = yield* OperationRepository
    const watches = yield* WatchRepository
    const rows = [
      operationRow({ ...DASHBOARD_ROWS.dead, state: "dead", lastKind: "permanent", lastHTTPStatus: 400, updatedAt: now - 60_000 }),
      operationRow({ ...DASHBOARD_ROWS.dead2, ownerDID: "did:owner:2", state: "dead", lastKind: "permanent", lastHTTPStatus: 422 }),
      operationRow({
        ...DASHBOARD_ROWS.unsettled,
        state: "reconcile_only",
        sendMarker: "run-1",
        inDoubtSince: now - 120_000,
        lastKind: "unknown",
        reissueIntent: { kind: "reconcile" },
        sourceID: null
      }),
      operationRow({
        ...DASHBOARD_ROWS.hostile,
        state: "attempted",
        lastKind: HOSTILE,
        lastHTTPStatus: 503,
        target: HOSTILE,
        resultEntity: { note: HOSTILE },
        leaseToken: SECRET_LEASE,
        incarnation: "inc-1",
        leaseExpiresAt: now + 600_000,
        nextAttemptAt: now - 1000,
        sourceID: null
      }),
      ...Array.from({ length: 60 }, (_, i) =>
        operationRow({ callerDID: "did:caller:9", operationID: `op-done-${String(i).padStart(2, "0")}`, sourceID: `src-${i}`, createdAt: now - 3_600_000 - i * 1000 }))
    ]
    for (const row of rows) if (!(yield* operations.insert(row))) return yield* Effect.dieMessage(`seed refused ${row.operationID}`)
    yield* watches.insert(watchRow({ ...DASHBOARD_ROWS.watch, documentID: "doc-watch", verificationStatus: "repair_failed", nextAttemptAt: null }))
  })).then(() => store.setSyncState("gcal", `did:owner:${HOSTILE}`, { status: "error", lastSyncedAt: "", entityCount: 3, checkpoint: { page: HOSTILE }, error: HOSTILE }))
