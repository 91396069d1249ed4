import { ConnectorStore, type OperationKey } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { claimFor } from "./faults.support.js"
import { freshSqlitePath } from "./support/databases.js"

// On the Effect API a winner reader is the caller's own Effect, run on the
// caller's fiber: the store does not interrupt it. What the store bounds is
// what it holds meanwhile: at the call's deadline the transaction is rolled
// back, so its lock and connection go on to the next call, and the call
// fails with `timeout` once its reader ends. Nothing of it is written.

const CALL_TIMEOUT_MS = 300

type Readers = { readonly readWinner: (documentID: string) => Effect.Effect<string> }

const backends: ReadonlyArray<{ readonly name: string; readonly layer: (readers: Readers) => Layer.Layer<ConnectorStore, unknown> }> = [
  { name: "memory", layer: (readers) => Memory.layer(readers, { callTimeoutMs: CALL_TIMEOUT_MS }) },
  { name: "SQLite", layer: (readers) => Sql.layer({ url: freshSqlitePath(), callTimeoutMs: CALL_TIMEOUT_MS }, readers) }
]

const KEY = (id: string): OperationKey => ({ callerDID: "did:caller:faults", operationID: id })

for (const backend of backends) {
  describe(`an Effect winner reader that outlives its call's bound, on ${backend.name}`, () => {
    it("the transaction is given up at the deadline (other writes go on), and the call fails with timeout when its reader ends, writing nothing", async () => {
      const program = Effect.gen(function*() {
        const release = yield* Deferred.make<void>()
        const reached = yield* Deferred.make<void>()
        let stalled = false
        const readers: Readers = {
          readWinner: (documentID) =>
            stalled
              ? Effect.zipRight(Deferred.succeed(reached, undefined), Effect.as(Deferred.await(release), `winner-of-${documentID}`))
              : Effect.succeed(`winner-of-${documentID}`)
        }
        const scope = yield* Scope.make()
        const store = Context.get(yield* Layer.buildWithScope(backend.layer(readers), scope), ConnectorStore)

        const claim = yield* store.claimOperation(claimFor("stuck"))
        if (claim.outcome !== "claimed") return yield* Effect.die(`claim: ${claim.outcome}`)
        yield* store.markOperationSent(KEY("stuck"), { leaseToken: claim.lease.token })
        const before = yield* store.getOperation(KEY("stuck"))
        const finalize = { leaseToken: claim.lease.token, sourceID: "src-stuck", documentID: "doc-stuck", watchDueAt: 0 }

        stalled = true
        const started = performance.now()
        const stuck = yield* Effect.fork(store.finalizeOperationAndArmWatch(KEY("stuck"), finalize))
        yield* Deferred.await(reached)
        // Past the deadline the store has let its transaction go: another call writes.
        yield* Effect.sleep(`${CALL_TIMEOUT_MS + 100} millis`)
        const other = yield* store.claimOperation(claimFor("other"))
        const stuckYet = stuck.unsafePoll() === null

        yield* Deferred.succeed(release, undefined)
        const ended = yield* Fiber.await(stuck)
        const elapsed = performance.now() - started
        stalled = false
        const after = yield* store.getOperation(KEY("stuck"))
        const retried = yield* store.finalizeOperationAndArmWatch(KEY("stuck"), finalize)
        yield* Scope.close(scope, Exit.void)
        return { before, other, stuckYet, ended, elapsed, after, retried }
      })
      const { after, before, elapsed, ended, other, retried, stuckYet } = await Effect.runPromise(program)
      expect(other.outcome).toBe("claimed")
      expect(stuckYet).toBe(true)
      expect(elapsed).toBeGreaterThanOrEqual(CALL_TIMEOUT_MS)
      expect(Exit.isFailure(ended) && ended.cause._tag === "Fail" ? ended.cause.error : ended).toMatchObject({
        _tag: "PersistenceError",
        reason: "timeout",
        method: "finalizeOperationAndArmWatch"
      })
      expect(after).toEqual(before)
      expect(retried.outcome).toBe("committed")
    })

    it("interrupting the caller ends the call at once and rolls its transaction back", async () => {
      const program = Effect.gen(function*() {
        const reached = yield* Deferred.make<void>()
        let stalled = false
        const readers: Readers = {
          readWinner: (documentID) =>
            stalled ? Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never) : Effect.succeed(`winner-of-${documentID}`)
        }
        const scope = yield* Scope.make()
        const store = Context.get(yield* Layer.buildWithScope(backend.layer(readers), scope), ConnectorStore)
        const claim = yield* store.claimOperation(claimFor("interrupted"))
        if (claim.outcome !== "claimed") return yield* Effect.die(`claim: ${claim.outcome}`)
        yield* store.markOperationSent(KEY("interrupted"), { leaseToken: claim.lease.token })
        const finalize = { leaseToken: claim.lease.token, sourceID: "src-i", documentID: "doc-i", watchDueAt: 0 }
        stalled = true
        const running = yield* Effect.fork(store.finalizeOperationAndArmWatch(KEY("interrupted"), finalize))
        yield* Deferred.await(reached)
        yield* Fiber.interrupt(running)
        // Well before the deadline, the lock is free again.
        const other = yield* store.claimOperation(claimFor("after-interrupt"))
        stalled = false
        const retried = yield* store.finalizeOperationAndArmWatch(KEY("interrupted"), finalize)
        yield* Scope.close(scope, Exit.void)
        return { other, retried }
      })
      const { other, retried } = await Effect.runPromise(program)
      expect(other.outcome).toBe("claimed")
      expect(retried.outcome).toBe("committed")
    })
  })
}
