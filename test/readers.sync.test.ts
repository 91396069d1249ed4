import { ConnectorStore, type PromiseConnectorStore, WinnerReadFailed } from "@connector-store/core"
import { fromPromiseReaders } from "@connector-store/core/adapter"
import * as Memory from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW } from "./operations.fixtures.js"
import { freshSqlitePath } from "./support/databases.js"

const tx = { adapter: "test" } as const
const handle = Effect.succeed(tx)

/** The failure of `effect` run to its end (asynchronously if it must). */
const failureOf = async <A, E>(effect: Effect.Effect<A, E>): Promise<E | undefined> => {
  const exit = await Effect.runPromiseExit(effect)
  return Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
}

describe("Promise-style winner readers, answering synchronously or not", () => {
  it("a synchronous reader is read without leaving the fiber; an asynchronous one gives the same answer", async () => {
    const seen: Array<unknown> = []
    const sync = fromPromiseReaders({ readWinner: (documentID: string, handed: unknown) => (seen.push(handed), `w-${documentID}`) }, handle)
    const async = fromPromiseReaders({ readWinner: async (documentID: string) => `w-${documentID}` }, handle)
    // runSync throws on any asynchronous step: the synchronous reader has none.
    expect(Effect.runSync(sync.readWinner!("doc-1"))).toBe("w-doc-1")
    expect(seen).toEqual([tx])
    expect(await Effect.runPromise(async.readWinner!("doc-1"))).toBe("w-doc-1")
    expect(Exit.isFailure(Effect.runSyncExit(async.readWinner!("doc-1")))).toBe(true)
    // No winner is an answer too.
    expect(Effect.runSync(fromPromiseReaders({ readWinner: () => null }, handle).readWinner!("doc-1"))).toBeNull()
  })

  it("a reader that throws, synchronously or by rejecting, fails with WinnerReadFailed carrying the cause", async () => {
    const boom = new Error("document store down")
    for (const readWinner of [() => { throw boom }, async () => { throw boom }]) {
      const failure = await failureOf(fromPromiseReaders({ readWinner }, handle).readWinner!("doc-1"))
      expect(failure).toBeInstanceOf(WinnerReadFailed)
      expect(failure).toMatchObject({ documentID: "doc-1", cause: boom })
    }
  })

  it("a reader answering something other than a string or null fails with WinnerReadFailed, synchronously or not", async () => {
    for (const answer of [42, { digest: "w" }, undefined, ["w"]]) {
      for (const readWinner of [() => answer, async () => answer]) {
        const failure = await failureOf(fromPromiseReaders({ readWinner: readWinner as never }, handle).readWinner!("doc-1"))
        expect(failure).toBeInstanceOf(WinnerReadFailed)
        expect((failure as WinnerReadFailed).cause).toBeInstanceOf(TypeError)
      }
    }
  })

  it("a batch reader may answer a Map or a record, synchronously or not, with the same result; a throw fails the batch", async () => {
    const expected = new Map([["doc-1", "w-1"], ["doc-2", null]])
    const answers = [
      () => new Map(expected),
      () => ({ "doc-1": "w-1", "doc-2": null }),
      async () => new Map(expected),
      async () => ({ "doc-1": "w-1", "doc-2": null })
    ]
    for (const readWinners of answers) {
      const read = fromPromiseReaders({ readWinners }, handle).readWinners!(["doc-1", "doc-2"])
      expect(await Effect.runPromise(read)).toEqual(expected)
    }
    expect(Effect.runSync(fromPromiseReaders({ readWinners: answers[0]! }, handle).readWinners!(["doc-1"]))).toEqual(expected)
    const failure = await failureOf(
      fromPromiseReaders({ readWinners: () => { throw new Error("down") } }, handle).readWinners!(["doc-1", "doc-2"])
    )
    expect(failure).toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1,doc-2" })
  })

  it("on the memory adapter a whole finalize with a synchronous reader completes without leaving its fiber", async () => {
    const runtime = ManagedRuntime.make(Memory.layer(fromPromiseReaders({ readWinner: () => "w-sync" }, handle)))
    try {
      const finalized = runtime.runSyncExit(Effect.gen(function*() {
        const store = yield* ConnectorStore
        const claim = yield* store.claimOperation(claimInput())
        if (claim.outcome !== "claimed") return yield* Effect.die(claim)
        yield* store.markOperationSent(KEY, { leaseToken: claim.lease.token })
        return yield* store.finalizeOperationAndArmWatch(KEY, {
          leaseToken: claim.lease.token,
          sourceID: "src-1",
          documentID: "doc-1",
          providerEtag: "etag-1",
          resultEntity: { id: "src-1" },
          watchDueAt: NOW + 5_000
        })
      }))
      expect(Exit.isSuccess(finalized) && finalized.value).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "w-sync" } })
      // Each of the three transactions committed: another fiber reads what the first one wrote.
      const stored = runtime.runSync(Effect.flatMap(ConnectorStore, (store) => store.getOperation(KEY)))
      expect(Option.getOrUndefined(stored)).toMatchObject({ state: "committed", resultEntity: { id: "src-1" } })
    } finally {
      await runtime.dispose()
    }
  })
})

const stores = [
  { name: "memory", open: (options: Record<string, unknown>) => Promise.resolve(Memory.openMemoryConnectorStore(options)) },
  { name: "sqlite", open: (options: Record<string, unknown>) => openConnectorStore({ url: freshSqlitePath(), ...options }) }
] as const

const opened: Array<PromiseConnectorStore<unknown>> = []
afterEach(async () => {
  await Promise.all(opened.splice(0).map((store) => store.close()))
})

describe.each(stores)("finalize through the Promise API on $name, with a synchronous or an asynchronous reader", ({ open }) => {
  const finalizeWith = async (readWinner: (documentID: string) => unknown) => {
    const store = await open({ now: () => NOW, readWinner })
    opened.push(store as PromiseConnectorStore<unknown>)
    const claim = await store.claimOperation(claimInput())
    if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
    await store.markOperationSent(KEY, { leaseToken: claim.lease.token })
    const finalized = store.finalizeOperationAndArmWatch(KEY, {
      leaseToken: claim.lease.token,
      sourceID: "src-1",
      documentID: "doc-1",
      providerEtag: "etag-1",
      resultEntity: { id: "src-1" },
      watchDueAt: NOW + 5_000
    })
    return { store, finalized }
  }
  /** What a finalize's outcome says, without the values drawn at random (tokens, node keys). */
  const comparable = (result: unknown) => {
    const { operation, watch, outcome } = result as { operation: Record<string, unknown>; watch: unknown; outcome: string }
    return { outcome, watch, state: operation.state, attempts: operation.attemptCount, resultEntity: operation.resultEntity }
  }

  it("both readers commit the same operation and arm the same watch", async () => {
    const sync = await (await finalizeWith((documentID) => `winner-of-${documentID}`)).finalized
    const async = await (await finalizeWith(async (documentID) => `winner-of-${documentID}`)).finalized
    expect(comparable(sync)).toEqual(comparable(async))
    expect(sync).toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1" } })
  })

  it("a synchronous reader that throws, or answers a non-string, rejects with WinnerReadFailed and changes nothing", async () => {
    const readers = [() => { throw new Error("down") }, () => 7, async () => 7]
    for (const readWinner of readers) {
      const { store, finalized } = await finalizeWith(readWinner)
      await expect(finalized).rejects.toMatchObject({
        _tag: "WinnerReadFailed",
        documentID: "doc-1",
        method: "finalizeOperationAndArmWatch"
      })
      expect(await store.getOperation(KEY)).toMatchObject({ state: "attempted" })
      expect(await store.getWatchByDocument("doc-1")).toBeNull()
    }
  })
})
