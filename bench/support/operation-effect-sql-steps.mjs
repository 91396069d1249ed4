// A diagnostic baseline, not the reference: the raw reference's statements
// and decisions (operation-raw-steps.mjs) run through @effect/sql's own
// client and transactions, with none of the project's code. Project vs this
// shows what the project adds; this vs raw shows what @effect/sql costs.
import { SqliteConnection } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { claimRow, identityOf, missed, numbered, statements } from "./operation-raw-steps.mjs"

/**
 * The lifecycle on a `ManagedRuntime` providing `SqlClient`: the claim one
 * statement, mark-sent and finalize one `sql.withTransaction` each (SQLite:
 * the no-op-write lock first, as the store does; Postgres: FOR UPDATE), one
 * `runPromise` per step.
 */
export const effectSqlLifecycle = async (runtime, tables, winnerOf) => {
  const sql = await runtime.runPromise(SqlClient)
  const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
  const texts = Object.fromEntries(Object.entries(statements(tables)).map(([name, text]) => [name, isPg ? numbered(text) : text]))
  // The project's SQLite client begins IMMEDIATE: no lock statement there.
  const takeLock = isPg || SqliteConnection.isProjectSqliteClient(sql)
    ? Effect.void
    : sql.unsafe(`UPDATE ${tables.operation} SET version = version WHERE 0 = 1`)
  const rows = (name, params, lock = false) => sql.unsafe(isPg && lock ? `${texts[name]} FOR UPDATE` : texts[name], params)
  const changes = (name, params) => Effect.map(sql.unsafe(texts[name], params).raw, (result) => isPg ? result.rowCount : result.changes)
  const expectOne = (step) => (n) => n === 1 ? Effect.void : Effect.die(missed(step))
  const lockOperation = (key) => Effect.zipRight(takeLock, Effect.map(rows("selectOperation", [key.callerDID, key.operationID], true), (r) => r[0]))
  const inTransaction = (effect) => runtime.runPromise(sql.withTransaction(effect))

  return {
    claimOperation: async (input) => {
      const { lease, params } = claimRow(input, Date.now())
      const inserted = await runtime.runPromise(rows("claim", params))
      if (inserted.length !== 1) throw new Error("the bench's keys are new; replays are not in the baseline")
      return { outcome: "claimed", lease: { token: lease } }
    },
    markOperationSent: (key, { leaseToken }) =>
      inTransaction(Effect.gen(function*() {
        const op = yield* lockOperation(key)
        if (op === undefined || op.state !== "attempted" || op.lease_token !== leaseToken) return { outcome: "lease-lost" }
        const version = Number(op.version)
        yield* Effect.flatMap(changes("markSent", [leaseToken, Number(op.attempts) + 1, version + 1, Date.now(), key.callerDID, key.operationID, version]), expectOne("markSent"))
        return { outcome: "sent" }
      })),
    finalizeOperationAndArmWatch: (key, input) =>
      inTransaction(Effect.gen(function*() {
        const op = yield* lockOperation(key)
        if (op === undefined || op.state !== "attempted" || op.lease_token !== input.leaseToken) return { outcome: "lease-lost" }
        const now = Date.now()
        const identity = identityOf(op, input.sourceID)
        const others = (yield* rows("watchesOfDocument", [input.documentID])).filter((w) =>
          w.owner_did === op.owner_did && w.model === op.model && w.source_id !== input.sourceID)
        const [existing] = yield* rows("selectWatch", identity, true)
        const winner = winnerOf(input.documentID)
        const version = Number(op.version)
        const attempts = op.send_marker === input.leaseToken ? Number(op.attempts) : Number(op.attempts) + 1
        yield* Effect.flatMap(changes("commit", [
          input.sourceID, input.documentID, input.providerEtag ?? null, JSON.stringify(input.resultEntity ?? null), attempts,
          input.leaseToken, version + 1, now, key.callerDID, key.operationID, version
        ]), expectOne("commit"))
        for (const other of others) {
          yield* Effect.flatMap(changes("deleteWatch", [...identityOf(other, other.source_id), Number(other.version)]), expectOne("supersede"))
        }
        yield* Effect.flatMap(
          existing === undefined
            ? changes("insertWatch", [...identity, input.documentID, null, winner, "pending_verification", 0, 0, input.watchDueAt, null, null, 0, now, now])
            : changes("openWatch", [input.documentID, Number(existing.repair_generation) + 1, winner, input.watchDueAt, Number(existing.version) + 1, now, ...identity, Number(existing.version)]),
          expectOne("arm")
        )
        return { outcome: "committed" }
      }))
  }
}
