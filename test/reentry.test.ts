import {
  ConnectorStore,
  type PromiseConnectorStore,
  WinnerReadFailed,
  type WinnerReaders
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { claimInput, KEY, NOW } from "./operations.fixtures.js"
import { watchRow } from "./support/contract/fixtures.js"
import { seedWatches } from "./support/contract/store.js"
import { adaptersUnderTest, type AdapterUnderTest } from "./support/stores.js"

/**
 * A winner reader (or a sweep candidate's apply) that calls its own store
 * back would wait for the transaction its caller holds: the store refuses
 * such a call at once with `ReentrantCall`, and the outer call goes on as
 * its reader failed. Calls from anywhere else are never refused.
 */

const adapters = await adaptersUnderTest()
const closing: Array<() => Promise<void>> = []
afterEach(async () => {
  // A store whose call hung (the guard missing) never closes: its test has failed already, so it is left behind.
  await Promise.all(closing.splice(0).map((close) => ended("closing the store", close()).catch(() => undefined)))
})

/** `promise`, or a rejection naming `what` when it has not settled within 10 s: a hang fails the test instead of timing it out. */
const ended = <A>(what: string, promise: Promise<A>): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} never ended`)), 10_000)
  })
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer))
}

const FINALIZE = {
  sourceID: "src-1",
  documentID: "doc-1",
  providerEtag: "etag-1",
  resultEntity: { id: "src-1" },
  watchDueAt: NOW + 5_000
}

/** What a reader does besides answering: nothing, or a call it makes first (whose outcome it records, and then fails with). */
type Inner = ((id: string) => Promise<unknown>) | undefined

/** Answers `winner-of-<id>` after `inner` (if any) settled; a rejected inner call is recorded and rethrown. */
const readerWith = (state: { inner: Inner; seen: Array<unknown>; release?: Promise<void> }) => async (documentID: string) => {
  if (state.release !== undefined) await state.release
  if (state.inner !== undefined) {
    try {
      state.seen.push({ ok: await state.inner(documentID) })
    } catch (error) {
      state.seen.push({ error })
      throw error
    }
  }
  return `winner-of-${documentID}`
}

const openPromise = async (adapter: AdapterUnderTest, readWinner: (id: string) => Promise<string>) => {
  const options = { now: () => NOW, readWinner }
  const store: PromiseConnectorStore<unknown> = adapter.name === "memory"
    ? openMemoryConnectorStore(options) as PromiseConnectorStore<unknown>
    : await openConnectorStore({ ...(await adapter.connection()), ...options, maxConnections: 4 })
  closing.push(() => store.close())
  return store
}

/** A claimed and sent operation of `key`'s id, ready to finalize; its lease token. */
const sentPromise = async (store: PromiseConnectorStore<unknown>, operationID = KEY.operationID) => {
  const claim = await store.claimOperation(claimInput({ operationID }))
  if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
  await store.markOperationSent({ ...KEY, operationID }, { leaseToken: claim.lease.token })
  return claim.lease.token
}

for (const adapter of adapters) {
  describe(`a callback calling its own store back, Promise API on ${adapter.name}`, () => {
    const inners: ReadonlyArray<[string, (store: PromiseConnectorStore<unknown>) => Inner]> = [
      ["getOperation", (store) => () => store.getOperation(KEY)],
      ["claimOperation", (store) => () => store.claimOperation(claimInput({ operationID: "op-inner" }))],
      ["listDueOperations", (store) => () => store.listDueOperations(NOW)]
    ]
    for (const [method, innerOf] of inners) {
      it(`a reader calling ${method} gets ReentrantCall at once; the finalize fails as its reader did; later calls work`, async () => {
        const state: { inner: Inner; seen: Array<unknown> } = { inner: undefined, seen: [] }
        const store = await openPromise(adapter, readerWith(state))
        const leaseToken = await sentPromise(store)
        state.inner = innerOf(store)
        const failed = await ended("the finalize", store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE }).then(
          () => undefined,
          (error: unknown) => error
        ))
        expect(state.seen).toEqual([{ error: expect.objectContaining({ _tag: "ReentrantCall", method }) }])
        expect(failed).toBeInstanceOf(WinnerReadFailed)
        expect(failed).toMatchObject({ _tag: "WinnerReadFailed", documentID: "doc-1", method: "finalizeOperationAndArmWatch" })
        expect((failed as WinnerReadFailed).cause).toMatchObject({ _tag: "ReentrantCall", method })

        // Nothing was written, and the store answers again: the same finalize now commits.
        state.inner = undefined
        expect(await ended("a later read", store.getOperation(KEY))).toMatchObject({ state: "attempted" })
        expect(await ended("a later finalize", store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE })))
          .toMatchObject({ outcome: "committed", watch: { observedWinnerDigest: "winner-of-doc-1" } })
        if (method === "claimOperation") expect(await store.getOperation({ ...KEY, operationID: "op-inner" })).toBeNull()
      })
    }

    it("a reader calling another store is not refused", async () => {
      const other = await openPromise(adapter, async (id) => `other-${id}`)
      await sentPromise(other, "op-other")
      const state: { inner: Inner; seen: Array<unknown> } = {
        inner: () => other.getOperation({ ...KEY, operationID: "op-other" }),
        seen: []
      }
      const store = await openPromise(adapter, readerWith(state))
      const leaseToken = await sentPromise(store)
      expect(await ended("the finalize", store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE })))
        .toMatchObject({ outcome: "committed" })
      expect(state.seen).toEqual([{ ok: expect.objectContaining({ operationID: "op-other", state: "attempted" }) }])
    })

    it("a call made while a reader is pending, from outside it, is not refused", async () => {
      let release!: () => void
      const state: { inner: Inner; seen: Array<unknown>; release?: Promise<void> } = { inner: undefined, seen: [] }
      const store = await openPromise(adapter, readerWith(state))
      const first = await sentPromise(store)
      const second = await sentPromise(store, "op-2")
      state.release = new Promise<void>((resolve) => release = resolve)
      const finalizes = [
        store.finalizeOperationAndArmWatch(KEY, { leaseToken: first, ...FINALIZE }),
        store.finalizeOperationAndArmWatch({ ...KEY, operationID: "op-2" }, {
          leaseToken: second,
          ...FINALIZE,
          sourceID: "src-2",
          documentID: "doc-2"
        })
      ]
      const read = store.getOperation(KEY)
      await new Promise((resolve) => setTimeout(resolve, 20))
      release()
      const results = await ended("the concurrent calls", Promise.all([...finalizes, read]))
      expect(results.slice(0, 2)).toMatchObject([{ outcome: "committed" }, { outcome: "committed" }])
      expect(results[2]).toMatchObject({ operationID: KEY.operationID })
    })

    it("a sweep candidate's apply calling its own store back gets ReentrantCall", async () => {
      const store = await openPromise(adapter, async (id) => `winner-of-${id}`)
      const scope = { ownerDID: "did:owner:1", connectorName: "gcal", model: "Event", accountKey: "acct-1" }
      await store.runEffect(
        seedWatches(watchRow({ ...scope, sourceID: "gone", documentID: "doc-gone", verifiedStateDigest: "d1", updatedAt: NOW - 1 })) as never
      )
      const run = await store.startRelistRun(scope)
      await store.commitSweepCheckpoint(run.runID, { page: 1, cursor: null, receipts: [], complete: true })
      const ref = { runID: run.runID, sourceID: "gone" }
      expect(await store.recordSweepOutcome(ref, "delete_local")).toBe("recorded")
      const seen: Array<unknown> = []
      const failed = await ended(
        "the apply",
        store.applySweepCandidate(ref, async () => {
          try {
            await store.getOperation(KEY)
          } catch (error) {
            seen.push(error)
            throw error
          }
        }).then(() => undefined, (error: unknown) => error)
      )
      expect(seen).toEqual([expect.objectContaining({ _tag: "ReentrantCall", method: "getOperation" })])
      expect(failed).toMatchObject({ _tag: "SweepApplyFailed", cause: { _tag: "ReentrantCall" } })
      expect(await ended("a later apply", store.applySweepCandidate(ref, async () => {}))).toBe("applied")
    })
  })

  describe(`a winner reader calling its own store back, Effect API on ${adapter.name}`, () => {
    /** An Effect store of this adapter whose reader runs `inner` first; its store, for the reader to call. */
    const effectStore = async (state: { inner: ((id: string) => Effect.Effect<unknown, unknown>) | undefined; seen: Array<unknown> }) => {
      const readers: WinnerReaders = {
        readWinner: (documentID) =>
          Effect.gen(function*() {
            if (state.inner !== undefined) {
              const inner = yield* Effect.either(state.inner(documentID))
              state.seen.push(inner._tag === "Left" ? { error: inner.left } : { ok: inner.right })
              if (inner._tag === "Left") return yield* new WinnerReadFailed({ documentID, cause: inner.left })
            }
            return `winner-of-${documentID}`
          })
      }
      const runtime = ManagedRuntime.make(adapter.layer(readers))
      closing.push(() => runtime.dispose())
      const store = await runtime.runPromise(ConnectorStore)
      const claim = await runtime.runPromise(store.claimOperation(claimInput()))
      if (claim.outcome !== "claimed") throw new Error(`claim: ${claim.outcome}`)
      await runtime.runPromise(store.markOperationSent(KEY, { leaseToken: claim.lease.token }))
      return { store, runtime, leaseToken: claim.lease.token }
    }

    const inners: ReadonlyArray<[string, (store: ConnectorStore["Type"]) => () => Effect.Effect<unknown, unknown>]> = [
      ["getOperation", (store) => () => store.getOperation(KEY)],
      ["claimOperation", (store) => () => store.claimOperation(claimInput({ operationID: "op-inner" }))],
      ["listDueOperations", (store) => () => store.listDueOperations(NOW)]
    ]
    for (const [method, innerOf] of inners) {
      it(`a reader calling ${method} gets ReentrantCall at once; the finalize fails as its reader did; later calls work`, async () => {
        const state: { inner: ((id: string) => Effect.Effect<unknown, unknown>) | undefined; seen: Array<unknown> } = {
          inner: undefined,
          seen: []
        }
        const { leaseToken, runtime, store } = await effectStore(state)
        state.inner = innerOf(store)
        const failed = await ended(
          "the finalize",
          runtime.runPromise(Effect.flip(store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE })))
        )
        expect(state.seen).toEqual([{ error: expect.objectContaining({ _tag: "ReentrantCall", method }) }])
        expect(failed).toMatchObject({ _tag: "WinnerReadFailed", method: "finalizeOperationAndArmWatch", cause: { _tag: "ReentrantCall", method } })

        state.inner = undefined
        expect(await ended("a later read", runtime.runPromise(store.getOperation(KEY))))
          .toMatchObject({ _tag: "Some", value: { state: "attempted" } })
        expect(await ended("a later finalize", runtime.runPromise(store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE }))))
          .toMatchObject({ outcome: "committed" })
      })
    }

    it("a reader calling another store is not refused, nor are calls from other fibers", async () => {
      const other = await effectStore({ inner: undefined, seen: [] })
      const state: { inner: ((id: string) => Effect.Effect<unknown, unknown>) | undefined; seen: Array<unknown> } = {
        inner: () => other.store.getOperation(KEY),
        seen: []
      }
      const { leaseToken, runtime, store } = await effectStore(state)
      const [finalized, read] = await ended(
        "the calls",
        runtime.runPromise(Effect.all([store.finalizeOperationAndArmWatch(KEY, { leaseToken, ...FINALIZE }), store.getOperation(KEY)], {
          concurrency: 2
        }))
      )
      expect(finalized).toMatchObject({ outcome: "committed" })
      expect(read).toMatchObject({ _tag: "Some" })
      expect(state.seen).toEqual([{ ok: expect.objectContaining({ _tag: "Some" }) }])
    })
  })
}
