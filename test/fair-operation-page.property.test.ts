import {
  advanceFairPosition,
  type ConnectorOperation,
  type DueOperationPosition,
  dueOperationPositionOf,
  fairOperationTable,
  fairPage,
  type FairPosition,
  type OperationState,
  OperationRepository,
  type PersistenceError,
  providerScope,
  type ProviderScope,
  Transactor
} from "@connector-store/core"
import * as fc from "fast-check"
import { Effect, type Layer, ManagedRuntime } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { keyLabel, NOW, operationRow } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { propertyRuns } from "./support/runs.js"
import { adaptersUnderTest, type StoreServices } from "./support/stores.js"

/**
 * The operations' batch page (`OperationRepository.lockDuePage`, in a
 * transaction) is the reference's (`fairPage` over `fairOperationTable`) on
 * every adapter: for any table of operations over a few owners (final ones,
 * ones due later or under a lease among them), any position of a batch (the
 * rotation's start, owners read on from a row, owners read to the end) and
 * any provider scopes passed over (whole connectors and single accounts,
 * some holding an owner's first rows in the due order), the same rows in the
 * same order, the same last owner visited, the same answer to "more", and
 * the same position for the next page. A row is passed over when its
 * connector is, or its connector's account is. Owners, connectors, accounts
 * and ids include non-ASCII text and mixed case, so byte order is what is
 * compared.
 */
const adapters = await adaptersUnderTest()

const owners = ["did:a", "did:B", "did:b", "did:é", "did:z"]
const connectors = ["c", "C", "ç"]
const accounts = ["x", "X", "ü"]
const states: ReadonlyArray<OperationState> = ["attempted", "attempted", "attempted", "attempted", "committed", "dead", "reconcile_only"]
const tick = fc.integer({ min: -3, max: 2 }).map((n) => NOW + n)

const scope = fc.record({
  connectorName: fc.constantFrom(...connectors),
  accountKey: fc.option(fc.constantFrom(...accounts), { nil: undefined })
}).map(({ accountKey, connectorName }) => providerScope(connectorName, accountKey))

const row = fc.record({
  ownerDID: fc.constantFrom(...owners),
  connectorName: fc.constantFrom(...connectors),
  accountKey: fc.constantFrom(...accounts),
  state: fc.constantFrom(...states),
  nextAttemptAt: fc.option(tick, { nil: null, freq: 3 }),
  leaseExpiresAt: fc.option(tick, { nil: null, freq: 3 }),
  callerDID: fc.constantFrom("did:caller:A", "did:caller:a", "did:caller:ø"),
  operationID: fc.constantFrom("op", "Op", "öp")
})

// An owner's rows in one scope that come first in the due order, the scope passed over.
const passedBacklog = fc.record({
  ownerDID: fc.constantFrom(...owners),
  scope,
  accountKey: fc.constantFrom(...accounts),
  nextAttemptAt: fc.option(fc.constant(NOW - 3), { nil: null }),
  count: fc.integer({ min: 3, max: 10 })
})

const fairCase = fc.record({
  rows: fc.array(row, { maxLength: 14 }),
  backlog: fc.option(passedBacklog, { nil: undefined }),
  excluding: fc.array(scope, { maxLength: 3 }),
  from: fc.constantFrom("", ...owners, "did:c"),
  // Indexes into the rows: owners read on after that row, and owners read to the end.
  readTo: fc.uniqueArray(fc.nat(23), { maxLength: 3 }),
  done: fc.subarray(owners, { maxLength: 2 }),
  limit: fc.integer({ min: 1, max: 5 })
})

type FairCase = typeof fairCase extends fc.Arbitrary<infer C> ? C : never

/** The case's rows as stored: each of its own key, an attempted one possibly leased, a final one unscheduled and unleased. */
const rowsOf = (c: FairCase): ReadonlyArray<ConnectorOperation> => {
  const generated = c.rows.map((r, i) =>
    operationRow({
      ownerDID: r.ownerDID,
      connectorName: r.connectorName,
      accountKey: r.accountKey,
      state: r.state,
      callerDID: r.callerDID,
      operationID: `${r.operationID}-${i}`,
      ...(r.state === "attempted"
        ? {
          nextAttemptAt: r.nextAttemptAt,
          ...(r.leaseExpiresAt === null ? {} : { leaseToken: `lease-${i}`, leaseExpiresAt: r.leaseExpiresAt, incarnation: `run-${i}` })
        }
        : {})
    })
  )
  const b = c.backlog
  const backlog = b === undefined ? [] : Array.from({ length: b.count }, (_, i) =>
    operationRow({
      ownerDID: b.ownerDID,
      connectorName: b.scope.connectorName,
      accountKey: b.scope.accountKey ?? b.accountKey,
      state: "attempted",
      nextAttemptAt: b.nextAttemptAt,
      callerDID: "did:caller:0",
      operationID: `passed-${i}`
    }))
  return [...generated, ...backlog]
}

/** The row retired: final, of no document and untouched since before `NOW`, so `collectFinished` removes it. */
const retired = (stored: ConnectorOperation): ConnectorOperation => ({
  ...stored,
  state: "dead",
  nextAttemptAt: null,
  leaseToken: null,
  leaseExpiresAt: null,
  documentID: null,
  version: stored.version + 1,
  updatedAt: NOW - 1_000
})

for (const adapter of adapters) {
  describe.runIf(adapter.name !== "postgres" || pgAvailable)(`the fair operation page agrees with the reference on ${adapter.name}`, () => {
    const runtime = ManagedRuntime.make(adapter.layer({}) as Layer.Layer<StoreServices, PersistenceError>)
    afterAll(() => runtime.dispose())

    it("same rows, order, last owner visited, more, and next position, scopes passed over", async () => {
      await fc.assert(
        fc.asyncProperty(fairCase, (c) =>
          runtime.runPromise(Effect.gen(function*() {
            const repo = yield* OperationRepository
            const { withTransaction } = yield* Transactor
            const rows = rowsOf(c)
            for (const stored of rows) if (!(yield* repo.insert(stored))) return yield* Effect.dieMessage("seed refused")
            const excluding: ReadonlyArray<ProviderScope> = c.backlog === undefined ? c.excluding : [...c.excluding, c.backlog.scope]
            const taken = (r: ConnectorOperation) =>
              !excluding.some((s) => s.connectorName === r.connectorName && (s.accountKey === undefined || s.accountKey === r.accountKey))
            const positioned = c.readTo.flatMap((i) => rows[i] === undefined || rows[i]!.state !== "attempted" ? [] : [rows[i]!])
            const at: FairPosition<DueOperationPosition> = {
              from: c.from,
              owners: Array.from(new Map(positioned.map((r) => [r.ownerDID, dueOperationPositionOf(r)] as const))),
              done: c.done
            }
            const page = fairPage(fairOperationTable(rows, NOW, taken), at, c.limit)
            // The owners read to the end are a set: the statement need not list them in the scan's order.
            const next = (last: FairPosition<DueOperationPosition>) => ({ ...last, done: [...last.done].sort() })
            const expected = {
              rows: page.rows.map(keyLabel),
              scanned: page.scanned,
              more: page.more,
              last: next(advanceFairPosition(at, page.rows.map((r) => [r.ownerDID, dueOperationPositionOf(r)] as const), page.done))
            }
            const read = yield* withTransaction(repo.lockDuePage(NOW, at, c.limit, excluding))
            for (const stored of rows) if (!(yield* repo.update(stored, retired(stored)))) return yield* Effect.dieMessage("retire refused")
            const collected = yield* repo.collectFinished({ before: NOW, limit: rows.length + 1 }, NOW)
            expect(collected).toBe(rows.length)
            expect({ rows: read.rows.map(keyLabel), scanned: read.scanned, more: read.more, last: next(read.last) }).toEqual(expected)
            expect(read.read).toBe(page.rows.length)
          }))),
        { numRuns: propertyRuns(150) }
      )
    })
  })
}
