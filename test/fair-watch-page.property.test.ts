import {
  advanceFairPosition,
  dueWatchPositionOf,
  type DueWatchPosition,
  fairPage,
  type FairPosition,
  fairWatchTable,
  type PersistenceError,
  type ProjectionWatch,
  type VerificationStatus,
  WatchRepository,
  watchKey
} from "@connector-store/core"
import * as fc from "fast-check"
import { Effect, type Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { propertyRuns } from "./support/runs.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/**
 * The watch batch claim's owner-fair page (`WatchRepository.lockClaimablePage`)
 * is the reference's (`fairPage` over `fairWatchTable`) on every adapter: for
 * any table of watches over a few owners (settled ones, ones due later or
 * under a live claim among them) and any position of a batch (the rotation's
 * start, owners read on from a row, owners read to the end), the same rows in
 * the same order, the same last owner visited, the same answer to "more",
 * and the same position for the next page. Owners and ids include non-ASCII
 * text and mixed case, so byte order is what is compared.
 */
const adapters = await adaptersUnderTest()

const owners = ["did:a", "did:B", "did:b", "did:é", "did:z"]
const statuses: ReadonlyArray<VerificationStatus> = ["pending_verification", "pending_verification", "verified", "repair_failed"]
const tick = fc.integer({ min: -3, max: 2 }).map((n) => NOW + n)

const row = fc.record({
  ownerDID: fc.constantFrom(...owners),
  connectorName: fc.constantFrom("c", "C", "ç"),
  verificationStatus: fc.constantFrom(...statuses),
  nextAttemptAt: fc.option(tick, { nil: null, freq: 6 }),
  claimedUntil: fc.option(tick, { nil: null, freq: 2 })
})

const fairCase = fc.record({
  rows: fc.array(row, { maxLength: 14 }),
  from: fc.constantFrom("", ...owners, "did:c"),
  // Indexes into the rows: owners read on after that row, and owners read to the end.
  readTo: fc.uniqueArray(fc.nat(13), { maxLength: 3 }),
  done: fc.subarray(owners, { maxLength: 2 }),
  limit: fc.integer({ min: 1, max: 5 })
})

for (const adapter of adapters) {
  describe.runIf(adapter.name !== "postgres" || pgAvailable)(`the fair watch page agrees with the reference on ${adapter.name}`, () => {
    const runtime = ManagedRuntime.make(adapter.layer({}) as Layer.Layer<StoreServices, PersistenceError>)
    afterAll(() => runtime.dispose())

    it("same rows, order, last owner visited, more, and next position", async () => {
      await fc.assert(
        fc.asyncProperty(fairCase, (c) =>
          runtime.runPromise(Effect.gen(function*() {
            const repo = yield* WatchRepository
            const rows: Array<ProjectionWatch> = c.rows.map((r, i) => watchRow({ ...r, sourceID: `s${i}`, documentID: `d${i}` }))
            for (const stored of rows) if (!(yield* repo.insert(stored))) return yield* Effect.dieMessage("seed refused")
            const positioned = c.readTo.flatMap((i) => rows[i] === undefined || rows[i]!.nextAttemptAt === null ? [] : [rows[i]!])
            const at: FairPosition<DueWatchPosition> = {
              from: c.from,
              owners: Array.from(new Map(positioned.map((r) => [r.ownerDID, dueWatchPositionOf(r)] as const))),
              done: c.done
            }
            const page = fairPage(fairWatchTable(rows, NOW), at, c.limit)
            // The owners read to the end are a set: the statement need not list them in the scan's order.
            const next = (last: FairPosition<DueWatchPosition>) => ({ ...last, done: [...last.done].sort() })
            const expected = {
              rows: page.rows.map(watchKey),
              scanned: page.scanned,
              more: page.more,
              last: next(advanceFairPosition(at, page.rows.map((r) => [r.ownerDID, dueWatchPositionOf(r)] as const), page.done))
            }
            const read = yield* repo.lockClaimablePage(NOW, at, c.limit)
            for (const stored of rows) yield* repo.delete(stored, stored.version)
            expect({ rows: read.rows.map(watchKey), scanned: read.scanned, more: read.more, last: next(read.last) }).toEqual(expected)
            expect(read.read).toBe(page.rows.length)
          }))),
        { numRuns: propertyRuns(150) }
      )
    })
  })
}
