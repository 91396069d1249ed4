import {
  type ConnectorOperation,
  ConnectorStore,
  type DuePage,
  type DueWorkParams,
  MAX_DUE_PAGE,
  OperationRepository,
  type PromiseConnectorStore,
  type ProjectionWatch,
  WatchRepository,
  type WinnerReaders
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { identityOf, keyLabel, NOW, operationRow, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedOperations, seedWatches } from "./support/contract/store.js"
import { Winners } from "./support/contract/winners.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

// The due sweep a page at a time (listDueWork), on every adapter: a pass
// returns every due row once, in the due order, whatever the page size;
// rows that fall due or move between pages; bad input refused. The expected
// order is written here on its own: unscheduled operations first, then by
// next attempt, then by key, ids compared by code point (byte order).

const adapters = await adaptersUnderTest()

/** Code-point order of two strings, as the contract states it. */
const byCodePoint = (a: string, b: string): number => {
  const left = Array.from(a, (c) => c.codePointAt(0)!)
  const right = Array.from(b, (c) => c.codePointAt(0)!)
  for (let i = 0; i < Math.min(left.length, right.length); i++) if (left[i] !== right[i]) return left[i]! - right[i]!
  return left.length - right.length
}

const operationOrder = (a: ConnectorOperation, b: ConnectorOperation): number =>
  (a.nextAttemptAt ?? -Infinity) - (b.nextAttemptAt ?? -Infinity) || byCodePoint(a.callerDID, b.callerDID) ||
  byCodePoint(a.operationID, b.operationID)

const watchOrder = (a: ProjectionWatch, b: ProjectionWatch): number =>
  a.nextAttemptAt! - b.nextAttemptAt! || byCodePoint(a.ownerDID, b.ownerDID) || byCodePoint(a.connectorName, b.connectorName) ||
  byCodePoint(a.model, b.model) || byCodePoint(a.accountKey, b.accountKey) || byCodePoint(a.sourceID, b.sourceID)

const label = (row: ProjectionWatch) => `${row.ownerDID}/${row.sourceID}`

/** An attempted operation of its own key and node, due at `nextAttemptAt`. */
const dueOperation = (callerDID: string, operationID: string, nextAttemptAt: number | null, patch: Partial<ConnectorOperation> = {}) =>
  operationRow({ callerDID, operationID, nodeKey: `node-${callerDID}-${operationID}`, state: "attempted", nextAttemptAt, ...patch })

/** A watch of its own identity and document, due at `nextAttemptAt`. */
const dueWatch = (ownerDID: string, sourceID: string, nextAttemptAt: number | null, patch: Partial<ProjectionWatch> = {}) =>
  watchRow({ ownerDID, sourceID, documentID: `doc-${ownerDID}-${sourceID}`, nextAttemptAt, ...patch })

// Ids whose byte order differs from a locale's: upper case before lower, and characters beyond ASCII.
const CALLERS = ["did:Z", "did:a", "did:é", "did:😀"]
const OWNERS = ["did:owner:B", "did:owner:a", "did:owner:ø"]
const TIMES = [NOW - 30, NOW - 20, NOW - 20, NOW - 10, NOW]

/**
 * A backlog: due operations (unscheduled ones, ties on one due time across
 * keys, one due exactly now) beside ones that are not due, and watches due
 * by schedule in both unsettled statuses beside settled and later ones.
 */
const backlog = () => {
  const dueOperations: Array<ConnectorOperation> = []
  CALLERS.forEach((caller, c) => {
    dueOperations.push(dueOperation(caller, "unscheduled", null))
    TIMES.forEach((time, t) => dueOperations.push(dueOperation(caller, `op-${t}-${c % 2 === 0 ? "x" : "X"}`, time)))
  })
  const notDueOperations = [
    dueOperation("did:a", "later", NOW + 1),
    dueOperation("did:a", "committed", NOW - 5, { state: "committed" }),
    dueOperation("did:a", "dead", null, { state: "dead" }),
    dueOperation("did:a", "reconcile", NOW - 5, { state: "reconcile_only" })
  ]
  const dueWatches: Array<ProjectionWatch> = []
  OWNERS.forEach((owner, o) =>
    TIMES.forEach((time, t) =>
      dueWatches.push(dueWatch(owner, `src-${t}`, time, { verificationStatus: (o + t) % 2 === 0 ? "pending_verification" : "repair_failed" }))
    )
  )
  // Settled and unscheduled watches whose winner stays put, so the audit adds nothing.
  const notDueWatches = [
    dueWatch("did:owner:a", "later", NOW + 1),
    dueWatch("did:owner:a", "unscheduled", null),
    dueWatch("did:owner:a", "verified", NOW - 5, { verificationStatus: "verified" })
  ]
  return {
    dueOperations: dueOperations.sort(operationOrder),
    dueWatches: dueWatches.sort(watchOrder),
    seed: Effect.zipRight(seedOperations(...dueOperations, ...notDueOperations), seedWatches(...dueWatches, ...notDueWatches)),
    /** Every winner equal to its watch's verified watermark: no audit divergence. */
    winners: new Winners(Object.fromEntries([...dueWatches, ...notDueWatches].map((row) => [row.documentID, row.verifiedStateDigest])))
  }
}

/** A page through the Effect API. */
const page = (params: DueWorkParams) => Effect.flatMap(ConnectorStore, (store) => store.listDueWork(params))

/** Every page of a pass from `cursor` (from the first when absent), failing past `maxPages` (a cursor that does not move). */
const passFrom = (params: Omit<DueWorkParams, "cursor">, from: string | undefined, maxPages: number) =>
  Effect.gen(function*() {
    const pages: Array<DuePage> = []
    let cursor = from
    for (;;) {
      const next = yield* page({ ...params, ...(cursor === undefined ? {} : { cursor }) })
      pages.push(next)
      if (next.cursor === null) return pages
      if (pages.length >= maxPages) return yield* Effect.dieMessage(`the pass did not end within ${maxPages} pages`)
      cursor = next.cursor
    }
  })

/** Every page of one pass, from its first. */
const pass = (params: Omit<DueWorkParams, "cursor">, maxPages: number) => passFrom(params, undefined, maxPages)

/** Moves the next attempt of operation `did:a/operationID`, as a write by a runner would. */
const reschedule = (operationID: string, nextAttemptAt: number) =>
  Effect.gen(function*() {
    const repo = yield* OperationRepository
    const row = Option.getOrThrow(yield* repo.get({ callerDID: "did:a", operationID }))
    expect(yield* repo.update(row, { ...row, nextAttemptAt, version: row.version + 1 })).toBe(true)
  })

/** Moves the next attempt of the watch of `did:owner:a` and `sourceID`. */
const rescheduleWatch = (sourceID: string, nextAttemptAt: number) =>
  Effect.gen(function*() {
    const repo = yield* WatchRepository
    const row = Option.getOrThrow(yield* repo.get(identityOf({ ownerDID: "did:owner:a", sourceID })))
    expect(yield* repo.update(row, { ...row, nextAttemptAt, version: row.version + 1 })).toBe(true)
  })

for (const adapter of adapters) {
  const onStore = <A, E>(readers: WinnerReaders, body: Effect.Effect<A, E, StoreServices>) =>
    onFreshStore(adapter, readers, Effect.zipRight(at(NOW), body))

  describe(`due pages on ${adapter.name}`, () => {
    for (const limit of [1, 4, 100]) {
      it.effect(`a pass of pages of ${limit} returns every due row exactly once, in the due order`, () => {
        const { dueOperations, dueWatches, seed, winners } = backlog()
        return onStore(winners.single(), Effect.gen(function*() {
          yield* seed
          const pages = yield* pass({ now: NOW, limit }, 200)
          for (const each of pages) {
            expect(each.operations.length).toBeLessThanOrEqual(limit)
            expect(each.watches.length).toBeLessThanOrEqual(limit)
            expect(each.corrupt).toEqual([])
          }
          // In order across the pages, each once: ties on a due time are split by the key, so a row due
          // at the cursor's own time after the cursor's key is on the next page, never lost or repeated.
          expect(pages.flatMap((each) => each.operations).map(keyLabel)).toEqual(dueOperations.map(keyLabel))
          expect(pages.flatMap((each) => each.operations)).toEqual(dueOperations)
          expect(pages.flatMap((each) => each.watches).map(label)).toEqual(dueWatches.map(label))
          expect(pages.flatMap((each) => each.watches)).toEqual(dueWatches)
          const longest = Math.max(dueOperations.length, dueWatches.length)
          expect(pages.length).toBe(longest < limit ? 1 : Math.floor(longest / limit) + 1)
        }))
      }, 60_000)
    }

    it.effect("a kind read to its end stays done while the other goes on; the next pass starts over", () =>
      onStore(new Winners().single(), Effect.gen(function*() {
        const operations = [dueOperation("did:a", "op-1", NOW - 2), dueOperation("did:a", "op-2", NOW - 1)]
        const watches = [1, 2, 3, 4, 5].map((n) => dueWatch("did:owner:a", `src-${n}`, NOW - 10 + n))
        yield* seedOperations(...operations)
        yield* seedWatches(...watches)
        const first = yield* page({ now: NOW, limit: 2 })
        expect(first.operations.map(keyLabel)).toEqual(operations.map(keyLabel))
        // A full page of operations may be the last: the next page finds none and ends the kind.
        const second = yield* page({ now: NOW, limit: 2, cursor: first.cursor! })
        expect(second.operations).toEqual([])
        yield* seedOperations(dueOperation("did:b", "op-3", NOW))
        const third = yield* page({ now: NOW, limit: 2, cursor: second.cursor! })
        expect(third.operations).toEqual([])
        expect(third.watches.map(label)).toEqual(["did:owner:a/src-5"])
        expect(third.cursor).toBeNull()
        const again = yield* page({ now: NOW, limit: 10 })
        expect(again.operations.map(keyLabel)).toEqual(["did:a/op-1", "did:a/op-2", "did:b/op-3"])
        expect(again.watches).toHaveLength(5)
        expect(again.cursor).toBeNull()
      })))

    it.effect("rows that fall due or move between pages: after the cursor they come in this pass, before it in the next", () =>
      onStore(new Winners().single(), Effect.gen(function*() {
        const ops = [10, 20, 30, 40].map((ago, i) => dueOperation("did:a", `op-${i}`, NOW - 100 + ago))
        const watches = [10, 20, 30, 40].map((ago, i) => dueWatch("did:owner:a", `src-${i}`, NOW - 100 + ago))
        yield* seedOperations(...ops)
        yield* seedWatches(...watches)
        const first = yield* page({ now: NOW, limit: 2 })
        expect(first.operations.map((row) => row.operationID)).toEqual(["op-0", "op-1"])
        expect(first.watches.map((row) => row.sourceID)).toEqual(["src-0", "src-1"])

        // Between the pages: new rows due after the cursor and before it; a listed row due again later;
        // a row not yet listed moved out of reach.
        yield* seedOperations(dueOperation("did:a", "late-after", NOW - 65), dueOperation("did:a", "late-before", NOW - 95))
        yield* seedWatches(dueWatch("did:owner:a", "late-after", NOW - 65), dueWatch("did:owner:a", "late-before", NOW - 95))
        yield* reschedule("op-0", NOW - 55)
        yield* reschedule("op-2", NOW + 1_000)
        yield* rescheduleWatch("src-0", NOW - 55)
        yield* rescheduleWatch("src-2", NOW + 1_000)

        const rest = yield* passFrom({ now: NOW, limit: 2 }, first.cursor!, 10)
        expect(rest.flatMap((each) => each.operations).map((row) => row.operationID)).toEqual(["late-after", "op-3", "op-0"])
        expect(rest.flatMap((each) => each.watches).map((row) => row.sourceID)).toEqual(["late-after", "src-3", "src-0"])
        const next = yield* pass({ now: NOW, limit: 2 }, 10)
        expect(next.flatMap((each) => each.operations).map((row) => row.operationID))
          .toEqual(["late-before", "op-1", "late-after", "op-3", "op-0"])
        expect(next.flatMap((each) => each.watches).map((row) => row.sourceID))
          .toEqual(["late-before", "src-1", "late-after", "src-3", "src-0"])
      })))

    it.effect("the audit goes on across pages, at most limit settled watches a page, and finds every diverged one", () => {
      const winners = new Winners()
      return onStore(winners.batch(), Effect.gen(function*() {
        const settled = Array.from({ length: 10 }, (_, i) =>
          dueWatch("did:owner:a", `settled-${i}`, null, { verificationStatus: i % 2 === 0 ? "verified" : "repair_failed" }))
        settled.forEach((row, i) => winners.set(row.documentID, i % 3 === 0 ? "w-moved" : row.observedWinnerDigest))
        const scheduled = dueWatch("did:owner:a", "scheduled", NOW - 1)
        winners.set(scheduled.documentID, "w-moved")
        yield* seedWatches(...settled, scheduled)
        const audited: Array<Array<string>> = []
        const diverged: Array<string> = []
        for (let call = 0; call < 3; call++) {
          winners.batchReads.length = 0
          // Each call is a whole pass (one watch due by schedule), and audits the next 4 settled watches.
          const next = yield* page({ now: NOW, limit: 4 })
          expect(next.cursor).toBeNull()
          expect(next.watches[0]?.sourceID).toBe("scheduled")
          audited.push(winners.batchReads.flat())
          diverged.push(...next.watches.slice(1).map((row) => row.sourceID))
        }
        expect(audited.map((read) => read.length)).toEqual([4, 4, 2])
        expect(audited.flat().sort()).toEqual(settled.map((row) => row.documentID).sort())
        expect(diverged.sort()).toEqual(settled.filter((_, i) => i % 3 === 0).map((row) => row.sourceID).sort())
      }))
    })

    it.effect("the audit's diverged watches come after the scheduled ones, and a watch both due and diverged once", () =>
      onStore(new Winners({ "doc-did:owner:a-both": "w-moved", "doc-did:owner:a-settled": "w-moved" }).single(), Effect.gen(function*() {
        const both = dueWatch("did:owner:a", "both", NOW - 1, { verificationStatus: "repair_failed" })
        const settled = dueWatch("did:owner:a", "settled", null, { verificationStatus: "verified" })
        yield* seedWatches(settled, both)
        const found = yield* page({ now: NOW, limit: 5 })
        expect(found.watches).toEqual([both, settled])
        expect(found.cursor).toBeNull()
      })))

    it.effect("with no reader anywhere it fails with WinnerReaderMissing; a per-call reader suffices", () =>
      onStore({}, Effect.gen(function*() {
        yield* seedWatches(dueWatch("did:owner:a", "a", null, { verificationStatus: "verified" }))
        expect(yield* failsChangingNothing(page({ now: NOW, limit: 5 })))
          .toMatchObject({ _tag: "WinnerReaderMissing", method: "listDueWork" })
        const found = yield* page({ now: NOW, limit: 5, readers: new Winners({ "doc-did:owner:a-a": "w" }).single() })
        expect(found.watches.map((row) => row.sourceID)).toEqual(["a"])
      })))

    it.effect("bad input is refused with InvalidInput naming the field, and changes nothing", () => {
      const { seed, winners } = backlog()
      return onStore(winners.single(), Effect.gen(function*() {
        yield* seed
        const valid = yield* page({ now: NOW, limit: 2 })
        const cursor = valid.cursor!
        const asCursor = (value: unknown) => Buffer.from(JSON.stringify(value), "utf8").toString("base64url")
        const bad: ReadonlyArray<readonly [string, unknown, string, RegExp?]> = [
          ["params missing", undefined, "params"],
          ["params a number", 5, "params"],
          ["now missing", { limit: 2 }, "params.now"],
          ["now negative", { now: -1, limit: 2 }, "params.now"],
          ["now a string", { now: String(NOW), limit: 2 }, "params.now"],
          ["limit missing", { now: NOW }, "params.limit"],
          ["limit 0", { now: NOW, limit: 0 }, "params.limit"],
          ["limit -1", { now: NOW, limit: -1 }, "params.limit"],
          ["limit 1.5", { now: NOW, limit: 1.5 }, "params.limit"],
          ["limit NaN", { now: NOW, limit: Number.NaN }, "params.limit"],
          ["limit Infinity", { now: NOW, limit: Number.POSITIVE_INFINITY }, "params.limit"],
          ["limit a string", { now: NOW, limit: "2" }, "params.limit"],
          ["limit above the maximum", { now: NOW, limit: MAX_DUE_PAGE + 1 }, "params.limit", /at most 10000/],
          ["cursor null", { now: NOW, limit: 2, cursor: null }, "params.cursor"],
          ["cursor a number", { now: NOW, limit: 2, cursor: 5 }, "params.cursor"],
          ["cursor empty", { now: NOW, limit: 2, cursor: "" }, "params.cursor", /not a cursor this store returned/],
          ["cursor not base64 JSON", { now: NOW, limit: 2, cursor: "garbage!" }, "params.cursor", /not a cursor/],
          ["cursor of another list", { now: NOW, limit: 2, cursor: asCursor([NOW, "did:a", "op-1"]) }, "params.cursor"],
          ["cursor with a kind cut short", { now: NOW, limit: 2, cursor: asCursor(["due", [NOW, "did:a"], "done"]) }, "params.cursor"],
          ["cursor with a time not a time", { now: NOW, limit: 2, cursor: asCursor(["due", ["1", "did:a", "op"], "done"]) }, "params.cursor"],
          ["cursor with a part too many", { now: NOW, limit: 2, cursor: asCursor(["due", "done", "done", "more"]) }, "params.cursor"],
          ["cursor cut short", { now: NOW, limit: 2, cursor: cursor.slice(0, -3) }, "params.cursor"],
          ["cursor with NUL", { now: NOW, limit: 2, cursor: "a\u0000b" }, "params.cursor"],
          ["an unknown key", { now: NOW, limit: 2, lmit: 3 }, "params.lmit", /did you mean limit\?/],
          ["an unknown reader", { now: NOW, limit: 2, readers: { readWinnr: () => Effect.succeed("w") } }, "params.readers.readWinnr"],
          ["readers not an object", { now: NOW, limit: 2, readers: 5 }, "params.readers"]
        ]
        for (const [name, params, field, reason] of bad) {
          const error = yield* failsChangingNothing(page(params as DueWorkParams))
          expect(error, name).toMatchObject({ _tag: "InvalidInput", method: "listDueWork", field })
          if (reason !== undefined) expect((error as { reason: string }).reason, name).toMatch(reason)
        }
        // The same store answers a valid call, and the cursor of the first page is still good.
        const second = yield* page({ now: NOW, limit: 2, cursor })
        expect(second.operations).toHaveLength(2)
        expect(yield* page({ now: NOW, limit: MAX_DUE_PAGE })).toMatchObject({ cursor: null })
      }))
    })
  })

  describe(`due pages through the Promise API on ${adapter.name}`, () => {
    it("a pass drains the backlog with the Promise readers given per call, and bad input rejects", async () => {
      const { dueOperations, dueWatches, seed } = backlog()
      const connection = await adapter.connection()
      const store: PromiseConnectorStore<unknown> = adapter.name === "memory"
        ? openMemoryConnectorStore({ now: () => NOW })
        : await openConnectorStore({ ...connection, now: () => NOW })
      try {
        await store.runEffect(seed as unknown as Effect.Effect<void, unknown, ConnectorStore>)
        await expect(store.listDueWork({ now: NOW, limit: 3 })).rejects.toMatchObject({ _tag: "WinnerReaderMissing", method: "listDueWork" })
        const read: Array<string> = []
        const readers = {
          readWinners: async (ids: ReadonlyArray<string>) => {
            read.push(...ids)
            return Object.fromEntries(ids.map((id) => [id, "digest-verified"]))
          }
        }
        const operations: Array<ConnectorOperation> = []
        const watches: Array<ProjectionWatch> = []
        let cursor: string | undefined
        for (let calls = 0; calls < 50; calls++) {
          const next: DuePage = await store.listDueWork({ now: NOW, limit: 3, readers, ...(cursor === undefined ? {} : { cursor }) })
          operations.push(...next.operations)
          watches.push(...next.watches)
          if (next.cursor === null) break
          cursor = next.cursor
        }
        expect(operations.map(keyLabel)).toEqual(dueOperations.map(keyLabel))
        expect(watches.map(label)).toEqual(dueWatches.map(label))
        expect(read.length).toBeGreaterThan(0)
        await expect(store.listDueWork({ now: NOW, limit: 0, readers })).rejects.toMatchObject({
          _tag: "InvalidInput",
          method: "listDueWork",
          field: "params.limit"
        })
        await expect(store.listDueWork({ now: NOW, limit: 3, cursor: "nope", readers })).rejects.toMatchObject({
          _tag: "InvalidInput",
          field: "params.cursor"
        })
        await expect(store.listDueWork({ now: NOW, limit: 3, readers: { readWinnr: () => "w" } as never })).rejects.toMatchObject({
          _tag: "InvalidInput",
          field: "params.readers.readWinnr"
        })
      } finally {
        await store.close()
      }
    })
  })
}
