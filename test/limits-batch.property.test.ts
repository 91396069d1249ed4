import type { PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { NOW } from "./support/contract/fixtures.js"
import { pgAvailable } from "./support/databases.js"
import { propertyRuns } from "./support/runs.js"
import { adaptersUnderTest } from "./support/stores.js"
import { claimInput, POLICY } from "./operations.fixtures.js"

/**
 * A batch claim on a store that enforces provider limits, for any backlog
 * over a few owners, connectors and accounts, some of it still leased, and
 * any pauses and caps: it leases only due operations, none of a paused
 * scope, no more in a capped scope than the cap leaves room for, at most
 * `limit`, each once; and every SQL adapter leases the same operations in
 * the same order as the memory adapter, whose page is the pure reference.
 */
const adapters = (await adaptersUnderTest()).filter((adapter) => adapter.name !== "memory")

type Store = PromiseConnectorStore<unknown>
interface Scope { readonly connectorName: string; readonly accountKey?: string | undefined }

const LAPSED = NOW + POLICY.leaseMs
const connectors = ["gcal", "box"]
const accounts = ["a", "b", "c"]

const scope: fc.Arbitrary<Scope> = fc.record({
  connectorName: fc.constantFrom(...connectors),
  accountKey: fc.option(fc.constantFrom(...accounts), { nil: undefined })
})

const batchCase = fc.record({
  operations: fc.array(fc.record({
    ownerDID: fc.constantFrom("did:o:1", "did:o:2", "did:o:3"),
    connectorName: fc.constantFrom(...connectors),
    accountKey: fc.constantFrom(...accounts),
    // Leased again after the first leases lapsed: live when the batch runs.
    live: fc.boolean()
  }), { minLength: 1, maxLength: 14 }),
  paused: fc.array(scope, { maxLength: 2 }),
  caps: fc.array(fc.record({ scope, maxInFlight: fc.integer({ min: 1, max: 3 }) }), { maxLength: 3 }),
  limit: fc.integer({ min: 1, max: 6 })
})
type BatchCase = typeof batchCase extends fc.Arbitrary<infer A> ? A : never

const inScope = (operation: { readonly connectorName: string; readonly accountKey: string }, s: Scope) =>
  operation.connectorName === s.connectorName && (s.accountKey === undefined || s.accountKey === operation.accountKey)

/** Seeds `c` on `store` (its clock `clock`) and runs one batch: the ids it leased, in order. */
const runCase = async (store: Store, clock: { now: number }, c: BatchCase): Promise<ReadonlyArray<string>> => {
  const inputs = c.operations.map(({ accountKey, connectorName, ownerDID }, i) =>
    claimInput({
      ownerDID,
      connectorName,
      accountKey,
      operationID: `op-${i}`,
      sourceID: `src-${i}`,
      documentID: `doc-${i}`,
      deterministicEventID: `event-${i}`
    })
  )
  clock.now = NOW
  for (const input of inputs) expect((await store.claimOperation(input)).outcome).toBe("claimed")
  clock.now = LAPSED
  for (const [i, input] of inputs.entries()) {
    if (c.operations[i]!.live) expect((await store.claimOperation(input)).outcome).toBe("claimed")
  }
  for (const cap of c.caps) await store.setProviderLimit({ ...cap.scope, maxInFlight: cap.maxInFlight })
  for (const pause of c.paused) await store.pauseProvider({ ...pause, until: LAPSED + 60_000, status: 429 })
  const batch = await store.claimDueOperations({ limit: c.limit })
  expect(batch.finished).toEqual([])
  return batch.claimed.map((claim) => claim.operation.operationID)
}

/** What any batch must hold to, whatever the adapter. */
const expectWithinLimits = (c: BatchCase, leased: ReadonlyArray<string>) => {
  const byID = new Map(c.operations.map((operation, i) => [`op-${i}`, operation]))
  expect(new Set(leased).size).toBe(leased.length)
  expect(leased.length).toBeLessThanOrEqual(c.limit)
  for (const id of leased) {
    const operation = byID.get(id)!
    expect(operation.live, `${id} was under a live lease`).toBe(false)
    expect(c.paused.some((s) => inScope(operation, s)), `${id} is under a paused scope`).toBe(false)
  }
  for (const cap of c.caps) {
    // The last cap set for a scope is the one in force.
    const maxInFlight = c.caps.filter((other) => JSON.stringify(other.scope) === JSON.stringify(cap.scope)).at(-1)!.maxInFlight
    const liveBefore = c.operations.filter((operation) => operation.live && inScope(operation, cap.scope)).length
    const added = leased.filter((id) => inScope(byID.get(id)!, cap.scope)).length
    expect(added, `leases added under ${JSON.stringify(cap.scope)}`).toBeLessThanOrEqual(Math.max(0, maxInFlight - liveBefore))
  }
}

const onMemory = async (c: BatchCase) => {
  const clock = { now: NOW }
  const store = openMemoryConnectorStore({ now: () => clock.now, providerLimits: true, operationPolicy: POLICY, readWinner: () => null }) as unknown as Store
  try {
    return await runCase(store, clock, c)
  } finally {
    await store.close()
  }
}

for (const adapter of adapters) {
  describe.runIf(adapter.name !== "postgres" || pgAvailable)(`a batch claim under provider limits on ${adapter.name}`, () => {
    it("leases only what the limits allow, and the same operations in the same order as the reference", async () => {
      await fc.assert(
        fc.asyncProperty(batchCase, async (c) => {
          const expected = await onMemory(c)
          expectWithinLimits(c, expected)
          const clock = { now: NOW }
          const connection = await adapter.connection()
          const store = await openConnectorStore({
            ...connection,
            now: () => clock.now,
            providerLimits: true,
            operationPolicy: POLICY,
            readWinner: () => null
          }) as unknown as Store
          try {
            expect(await runCase(store, clock, c)).toEqual(expected)
          } finally {
            await store.close()
          }
        }),
        { numRuns: propertyRuns(adapter.name === "postgres" ? 25 : 100) }
      )
    }, 600_000)
  })
}
