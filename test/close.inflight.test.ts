import { ConnectorStore, type PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput, KEY, NOW } from "./operations.fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"

const adapters = await adaptersUnderTest()

/** A latch a winner reader waits on while `held`; `reached` resolves when a reader is waiting. */
const makeHold = () => {
  let release!: () => void
  let reached!: () => void
  const state = {
    held: false,
    released: new Promise<void>((resolve) => release = resolve),
    reached: new Promise<void>((resolve) => reached = resolve),
    release: () => release(),
    arrive: () => reached()
  }
  return state
}

const finalizeInput = (leaseToken: string) => ({
  leaseToken,
  sourceID: "src-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { id: "src-1" },
  watchDueAt: NOW + 5_000
})

/** Lets every ready microtask and I/O callback run, so a settled Promise would have been seen. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 30))

const rejectionOf = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => "resolved", (error) => error)

for (const adapter of adapters) {
  describe(`close() with calls in flight on ${adapter.name}`, () => {
    const openWith = async (connection: { url: string; tablePrefix?: string }, hold?: ReturnType<typeof makeHold>) => {
      const options = {
        now: () => NOW,
        readWinner: async (documentID: string) => {
          if (hold?.held === true) {
            hold.arrive()
            await hold.released
          }
          return `winner-of-${documentID}`
        }
      }
      return (adapter.name === "memory"
        ? openMemoryConnectorStore(options)
        : await openConnectorStore({ ...connection, ...options })) as PromiseConnectorStore<unknown>
    }

    it("Promise API: the running calls complete, new ones are refused with StoreClosed, and close resolves after the last", async () => {
      const connection = await adapter.connection()
      const hold = makeHold()
      const store = await openWith(connection, hold)
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      await store.markOperationSent(KEY, { leaseToken: claim.lease.token })

      const order: Array<string> = []
      hold.held = true
      const finalized = store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token))
      finalized.then(() => order.push("finalize"), () => order.push("finalize failed"))
      await hold.reached
      // Admitted before close: on a single connection, queued behind the transaction that holds the winner read.
      const queued = store.claimOperation(claimInput({ operationID: "op-2", sourceID: "src-2", documentID: "doc-2" }))
      queued.then(() => order.push("queued"), () => order.push("queued failed"))

      const closed = store.close()
      closed.then(() => order.push("closed"))
      const closedAgain = store.close()
      closedAgain.then(() => order.push("closed again"))
      await settle()
      // The call holding the winner read has not ended, so neither has close (the queued call may have, where it has a connection of its own).
      expect(order.filter((event) => event !== "queued")).toEqual([])

      expect(await rejectionOf(store.getOperation(KEY))).toMatchObject({ _tag: "StoreClosed", method: "getOperation" })
      expect(await rejectionOf(store.armWatch({ ownerDID: "o", connectorName: "c", model: "m", accountKey: "a", sourceID: "s" }, "ingress", {} as never)))
        .toMatchObject({ _tag: "StoreClosed", method: "armWatch" })

      hold.release()
      expect(await finalized).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1" } })
      expect(await queued).toMatchObject({ outcome: "claimed" })
      await closed
      await closedAgain
      expect(order.slice(0, 2).sort()).toEqual(["finalize", "queued"])
      expect(order.slice(2)).toEqual(["closed", "closed again"])

      if (adapter.name === "memory") return
      // Nothing half-written: a store opened afterwards reads both calls' writes whole.
      const reopened = await openWith(connection)
      try {
        expect(await reopened.getOperation(KEY)).toMatchObject({ state: "committed", resultEntity: { id: "src-1" } })
        expect(await reopened.getWatchByDocument("doc-1")).toMatchObject({ observedWinnerDigest: "winner-of-doc-1" })
        expect(await reopened.getOperation({ ...KEY, operationID: "op-2" })).toMatchObject({ state: "attempted" })
      } finally {
        await reopened.close()
      }
    })

    it("Promise API: a call that fails while the store closes rejects with its own error, and close still waits for it", async () => {
      const hold = makeHold()
      const store = await openWith(await adapter.connection(), hold)
      const claim = await store.claimOperation(claimInput())
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      await store.markOperationSent(KEY, { leaseToken: claim.lease.token })
      hold.held = true
      const finalized = rejectionOf(store.finalizeOperationAndArmWatch(KEY, finalizeInput("not-the-lease")))
      // A stale lease is answered without a winner read on some paths: wait for whichever comes first.
      await Promise.race([hold.reached, finalized])
      const closed = store.close()
      hold.release()
      const outcome = await finalized
      expect(outcome === "resolved" ? outcome : (outcome as { _tag: string })._tag).not.toBe("StoreClosed")
      await closed
    })

    it("Effect API: closing the layer's scope waits for the running call, then refuses new ones", async () => {
      const reached = await Effect.runPromise(Deferred.make<void>())
      const release = await Effect.runPromise(Deferred.make<void>())
      const readers = {
        readWinner: (documentID: string) =>
          Effect.zipRight(Deferred.succeed(reached, undefined), Effect.as(Deferred.await(release), `winner-of-${documentID}`))
      }
      const program = Effect.gen(function*() {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(adapter.layer(readers), scope)
        const store = Context.get(context, ConnectorStore)
        const claim = yield* store.claimOperation(claimInput())
        if (claim.outcome !== "claimed") return yield* Effect.die(`claim: ${claim.outcome}`)
        yield* store.markOperationSent(KEY, { leaseToken: claim.lease.token })
        const running = yield* Effect.fork(store.finalizeOperationAndArmWatch(KEY, finalizeInput(claim.lease.token)))
        yield* Deferred.await(reached)
        const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
        yield* Effect.sleep("30 millis")
        const closedYet = closing.unsafePoll() !== null
        const refused = yield* Effect.exit(store.getOperation(KEY))
        yield* Deferred.succeed(release, undefined)
        const finalized = yield* Fiber.join(running)
        yield* Fiber.join(closing)
        const after = yield* Effect.exit(store.getOperation(KEY))
        return { closedYet, refused, finalized, after }
      })
      const { after, closedYet, finalized, refused } = await Effect.runPromise(program)
      expect(closedYet).toBe(false)
      expect(finalized).toMatchObject({ outcome: "committed" })
      for (const exit of [refused, after]) {
        expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toMatchObject({
          _tag: "StoreClosed",
          method: "getOperation"
        })
      }
    })
  })
}
