import { type ClaimResult, type PromiseConnectorStore, StoreSnapshot } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { Effect } from "effect"
import { NOW } from "./support/contract/fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"
import { claimInput, POLICY } from "./operations.fixtures.js"

// Provider limits on every adapter: bad input refused, set/get/list/clear,
// a pause that never shortens, a 429 recorded by one runner pausing its
// account for the others, caps counted across store instances (on Postgres
// claims racing from separate pools), a lapsed lease freeing its slot, and
// a key claimed while paused kept for the due sweep. The memory adapter has
// one store per database, so its "runners" are that store more than once.

const adapters = await adaptersUnderTest()

type Store = PromiseConnectorStore<unknown>
type Adapter = (typeof adapters)[number]

/** The test's clock, shared by every runner of a test. */
const testClock = () => {
  let now = NOW
  return { now: () => now, set: (time: number) => void (now = time) }
}

/** `count` runners on one fresh database, each a store of its own (but on memory), on `now`. */
const openRunners = async (adapter: Adapter, count: number, now: () => number, providerLimits = true): Promise<ReadonlyArray<Store>> => {
  const options = { now, providerLimits, operationPolicy: POLICY, readWinner: () => null }
  if (adapter.name === "memory") {
    const store = openMemoryConnectorStore(options) as unknown as Store
    return Array.from({ length: count }, () => store)
  }
  const connection = await adapter.connection()
  const open = () => openConnectorStore({ ...connection, ...options }) as Promise<unknown> as Promise<Store>
  const first = await open()
  return [first, ...await Promise.all(Array.from({ length: count - 1 }, open))]
}

const closeAll = async (stores: ReadonlyArray<Store>) => {
  for (const store of new Set(stores)) await store.close()
}

/** Runs `body` on fresh runners, closing them after. */
const withRunners = async (
  adapter: Adapter,
  count: number,
  body: (runners: ReadonlyArray<Store>, clock: ReturnType<typeof testClock>) => Promise<void>,
  providerLimits = true
) => {
  const clock = testClock()
  const runners = await openRunners(adapter, count, clock.now, providerLimits)
  try {
    await body(runners, clock)
  } finally {
    await closeAll(runners)
  }
}

const snapshotOf = (store: Store) => store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))

/** A claim of its own key on `accountKey`. */
const claimOn = (accountKey: string, operationID: string) => claimInput({ accountKey, operationID, sourceID: `src-${operationID}` })

const expectLimited = (result: ClaimResult, scope: object, reason: string, nextAttemptAt: number) =>
  expect(result).toMatchObject({ outcome: "scheduled", nextAttemptAt, limitedBy: { scope, reason } })

const A = { connectorName: "gcal", accountKey: "acct-A" }
const B = { connectorName: "gcal", accountKey: "acct-B" }

describe.each(adapters)("provider limits on $name", (adapter) => {
  it("refuses bad input with InvalidInput naming the field, and changes nothing", async () => {
    await withRunners(adapter, 1, async ([store]) => {
      await store!.setProviderLimit({ ...A, maxInFlight: 2 })
      await store!.pauseProvider({ ...A, until: NOW + 1_000 })
      const before = await snapshotOf(store!)
      const refusals: ReadonlyArray<readonly [() => Promise<unknown>, string, string]> = [
        [() => store!.setProviderLimit({ connectorName: "", maxInFlight: 2 }), "setProviderLimit", "limit.connectorName"],
        [() => store!.setProviderLimit({ ...A, accountKey: "", maxInFlight: 2 }), "setProviderLimit", "limit.accountKey"],
        [() => store!.setProviderLimit({ ...A, maxInFlight: 0 }), "setProviderLimit", "limit.maxInFlight"],
        [() => store!.setProviderLimit({ ...A, maxInFlight: 1.5 }), "setProviderLimit", "limit.maxInFlight"],
        [() => store!.setProviderLimit({ ...A } as never), "setProviderLimit", "limit.maxInFlight"],
        [() => store!.setProviderLimit({ ...A, maxInFlight: 3, maxInFlite: 4 } as never), "setProviderLimit", "limit.maxInFlite"],
        [() => store!.setProviderLimit(null as never), "setProviderLimit", "limit"],
        [() => store!.pauseProvider({ ...A, until: -1 }), "pauseProvider", "pause.until"],
        [() => store!.pauseProvider({ ...A, until: Number.NaN }), "pauseProvider", "pause.until"],
        [() => store!.pauseProvider({ ...A, until: NOW + 5_000, status: 1_000 }), "pauseProvider", "pause.status"],
        [() => store!.pauseProvider({ connectorName: "g\u0000cal", until: NOW + 5_000 }), "pauseProvider", "pause.connectorName"],
        [() => store!.resumeProvider({ accountKey: "acct-A" } as never), "resumeProvider", "scope.connectorName"],
        [() => store!.resumeProvider({ ...A, acountKey: "x" } as never), "resumeProvider", "scope.acountKey"],
        [() => store!.getProviderLimit(undefined as never), "getProviderLimit", "scope"]
      ]
      for (const [call, method, field] of refusals) {
        await expect(call(), field).rejects.toMatchObject({ _tag: "InvalidInput", method, field })
      }
      expect(await snapshotOf(store!)).toEqual(before)
    })
  })

  it("sets, reads, lists and clears caps, per account and per connector", async () => {
    await withRunners(adapter, 2, async ([one, other]) => {
      expect(await one!.getProviderLimit(A)).toBeNull()
      expect(await one!.listProviderLimits()).toEqual([])
      const set = await one!.setProviderLimit({ ...A, maxInFlight: 2 })
      expect(set).toEqual({ scope: A, maxInFlight: 2, pausedUntil: null, pauseStatus: null, version: 0, updatedAt: NOW })
      await one!.setProviderLimit({ connectorName: "gcal", maxInFlight: 5 })
      await one!.setProviderLimit({ ...B, accountKey: undefined, connectorName: "box", maxInFlight: 1 })
      expect(await other!.getProviderLimit(A)).toEqual(set)
      expect((await other!.listProviderLimits()).map((row) => [row.scope, row.maxInFlight])).toEqual([
        [{ connectorName: "box" }, 1],
        [{ connectorName: "gcal" }, 5],
        [A, 2]
      ])
      const cleared = await other!.setProviderLimit({ ...A, maxInFlight: null })
      expect(cleared).toMatchObject({ scope: A, maxInFlight: null, version: 1 })
      expect(await one!.getProviderLimit(A)).toEqual(cleared)
      expect(await one!.getProviderLimit({ connectorName: "gcal" })).toMatchObject({ maxInFlight: 5 })
      // The same cap again writes nothing.
      expect(await one!.setProviderLimit({ ...A, maxInFlight: null })).toEqual(cleared)
    })
  })

  it("a pause extends an earlier one but never shortens it; resume lifts it", async () => {
    await withRunners(adapter, 2, async ([one, other]) => {
      expect(await one!.pauseProvider({ ...A, until: NOW + 10_000, status: 429 })).toMatchObject({ pausedUntil: NOW + 10_000, pauseStatus: 429 })
      expect(await other!.pauseProvider({ ...A, until: NOW + 5_000, status: 503 })).toMatchObject({ pausedUntil: NOW + 10_000, pauseStatus: 429 })
      expect(await one!.getProviderLimit(A)).toMatchObject({ pausedUntil: NOW + 10_000, pauseStatus: 429, version: 0 })
      expect(await other!.pauseProvider({ ...A, until: NOW + 20_000 })).toMatchObject({ pausedUntil: NOW + 20_000, pauseStatus: null, version: 1 })
      expect(await one!.resumeProvider(A)).toMatchObject({ pausedUntil: null, pauseStatus: null, version: 2 })
      expect(await one!.resumeProvider(B)).toBeNull()
      expect(await one!.getProviderLimit(B)).toBeNull()
    })
  })

  it("a 429 recorded by one runner pauses its account for every runner until Retry-After; other accounts go on", async () => {
    await withRunners(adapter, 3, async ([first, second, third], clock) => {
      const claimed = await first!.claimOperation(claimOn("acct-A", "a-1"))
      if (claimed.outcome !== "claimed") throw new Error(`expected a claim, got ${claimed.outcome}`)
      expect((await first!.markOperationSent(claimed.operation, { leaseToken: claimed.lease.token })).outcome).toBe("sent")
      const failure = await first!.recordAttemptFailure(claimed.operation, {
        leaseToken: claimed.lease.token,
        kind: "retryable",
        httpStatus: 429,
        retryAt: NOW + 30_000
      })
      expect(failure).toMatchObject({ outcome: "retrying", operation: { nextAttemptAt: NOW + 30_000 } })
      expect(await third!.getProviderLimit(A)).toMatchObject({ pausedUntil: NOW + 30_000, pauseStatus: 429 })

      expectLimited(await second!.claimOperation(claimOn("acct-A", "a-2")), A, "paused", NOW + 30_000)
      expectLimited(await third!.claimOperation(claimOn("acct-A", "a-3")), A, "paused", NOW + 30_000)
      expect((await second!.claimOperation(claimOn("acct-B", "b-1"))).outcome).toBe("claimed")

      clock.set(NOW + 30_000)
      expect((await second!.claimOperation(claimOn("acct-A", "a-2"))).outcome).toBe("claimed")
      expect((await third!.claimOperation(claimOn("acct-A", "a-1"))).outcome).toBe("claimed")
    })
  })

  it("a 429 without Retry-After pauses the account until the operation's own next attempt; a later 429 never shortens it", async () => {
    await withRunners(adapter, 2, async ([first, second]) => {
      const one = await first!.claimOperation(claimOn("acct-A", "a-1"))
      const two = await second!.claimOperation(claimOn("acct-A", "a-2"))
      if (one.outcome !== "claimed" || two.outcome !== "claimed") throw new Error("expected two claims")
      const long = await first!.recordAttemptFailure(one.operation, { leaseToken: one.lease.token, kind: "retryable", httpStatus: 429, retryAt: NOW + 60_000 })
      const short = await second!.recordAttemptFailure(two.operation, { leaseToken: two.lease.token, kind: "retryable", httpStatus: 429 })
      if (short.outcome !== "retrying" || long.outcome !== "retrying") throw new Error("expected retries")
      expect(short.operation.nextAttemptAt).toBeLessThan(NOW + 60_000)
      expect(await first!.getProviderLimit(A)).toMatchObject({ pausedUntil: NOW + 60_000, pauseStatus: 429 })
    })
  })

  it("a pause of the whole connector limits every account's claims", async () => {
    await withRunners(adapter, 2, async ([first, second]) => {
      await first!.pauseProvider({ connectorName: "gcal", until: NOW + 5_000 })
      expectLimited(await second!.claimOperation(claimOn("acct-A", "a-1")), { connectorName: "gcal" }, "paused", NOW + 5_000)
      expectLimited(await second!.claimOperation(claimOn("acct-B", "b-1")), { connectorName: "gcal" }, "paused", NOW + 5_000)
      expect((await second!.claimOperation({ ...claimOn("acct-A", "other"), connectorName: "box" })).outcome).toBe("claimed")
    })
  })

  it("a cap of N leases exactly N of N + 2 claims racing from separate store instances", async () => {
    await withRunners(adapter, 5, async (runners) => {
      await runners[0]!.setProviderLimit({ ...A, maxInFlight: 3 })
      const results = await Promise.all(runners.map((runner, i) => runner.claimOperation(claimOn("acct-A", `race-${i}`))))
      const outcomes = results.map((result) => result.outcome)
      expect(outcomes.filter((outcome) => outcome === "claimed")).toHaveLength(3)
      for (const result of results.filter((r) => r.outcome !== "claimed")) {
        expectLimited(result, A, "at-capacity", NOW + POLICY.leaseMs)
      }
      // A second round while the three leases are live: every claim is refused.
      const again = await Promise.all(runners.map((runner, i) => runner.claimOperation(claimOn("acct-A", `more-${i}`))))
      expect(again.every((result) => result.outcome === "scheduled")).toBe(true)
      expect((await runners[1]!.claimOperation(claimOn("acct-B", "b-1"))).outcome).toBe("claimed")
    })
  })

  it("an account's cap counts its own live leases only", async () => {
    await withRunners(adapter, 2, async ([first, second]) => {
      await first!.setProviderLimit({ ...A, maxInFlight: 1 })
      expect((await first!.claimOperation(claimOn("acct-B", "b-1"))).outcome).toBe("claimed")
      expect((await second!.claimOperation(claimOn("acct-B", "b-2"))).outcome).toBe("claimed")
      expect((await second!.claimOperation(claimOn("acct-A", "a-1"))).outcome).toBe("claimed")
      expectLimited(await first!.claimOperation(claimOn("acct-A", "a-2")), A, "at-capacity", NOW + POLICY.leaseMs)
    })
  })

  it("a connector's cap counts the leases of all its accounts", async () => {
    await withRunners(adapter, 2, async ([first, second]) => {
      await first!.setProviderLimit({ connectorName: "gcal", maxInFlight: 2 })
      expect((await first!.claimOperation(claimOn("acct-A", "a-1"))).outcome).toBe("claimed")
      expect((await second!.claimOperation(claimOn("acct-B", "b-1"))).outcome).toBe("claimed")
      expectLimited(await second!.claimOperation(claimOn("acct-C", "c-1")), { connectorName: "gcal" }, "at-capacity", NOW + POLICY.leaseMs)
    })
  })

  it("a lapsed lease frees its slot", async () => {
    await withRunners(adapter, 2, async ([first, second], clock) => {
      await first!.setProviderLimit({ ...A, maxInFlight: 1 })
      const held = await first!.claimOperation(claimOn("acct-A", "a-1"))
      expect(held.outcome).toBe("claimed")
      expectLimited(await second!.claimOperation(claimOn("acct-A", "a-2")), A, "at-capacity", NOW + POLICY.leaseMs)
      clock.set(NOW + POLICY.leaseMs - 1)
      expect((await second!.claimOperation(claimOn("acct-A", "a-2"))).outcome).toBe("scheduled")
      clock.set(NOW + POLICY.leaseMs)
      expect((await second!.claimOperation(claimOn("acct-A", "a-2"))).outcome).toBe("claimed")
      expectLimited(await first!.claimOperation(claimOn("acct-A", "a-1")), A, "at-capacity", NOW + 2 * POLICY.leaseMs)
    })
  })

  it("a new key claimed while paused is stored unleased, due when the pause ends, and found by the due sweep then", async () => {
    await withRunners(adapter, 2, async ([first, second], clock) => {
      await first!.pauseProvider({ ...A, until: NOW + 7_000, status: 429 })
      // Asked to mark its request sent, a claim that does not lease marks nothing: no request leaves.
      const input = { ...claimOn("acct-A", "a-1"), markSent: true }
      expectLimited(await second!.claimOperation(input), A, "paused", NOW + 7_000)
      expect(await first!.getOperation(input)).toMatchObject({
        state: "attempted",
        attempts: 0,
        sendMarker: null,
        leaseToken: null,
        leaseExpiresAt: null,
        nextAttemptAt: NOW + 7_000
      })
      // A replay before then is the row's own schedule, and writes nothing.
      expect(await first!.claimOperation(input)).toMatchObject({ outcome: "scheduled", nextAttemptAt: NOW + 7_000 })
      expect((await first!.listDueWork({ now: NOW + 6_999, limit: 10 })).operations).toEqual([])
      clock.set(NOW + 7_000)
      const due = await first!.listDueWork({ now: NOW + 7_000, limit: 10 })
      expect(due.operations.map((row) => row.operationID)).toEqual(["a-1"])
      expect(await second!.claimOperation(input)).toMatchObject({ outcome: "claimed", created: false, reissue: null, operation: { attempts: 1 } })
    })
  })

  it("a store that does not enforce limits keeps them but claims as before, and a 429 pauses nothing", async () => {
    await withRunners(adapter, 1, async ([store]) => {
      await store!.pauseProvider({ ...A, until: NOW + 5_000 })
      await store!.setProviderLimit({ ...B, maxInFlight: 1 })
      const claimed = await store!.claimOperation(claimOn("acct-A", "a-1"))
      expect(claimed.outcome).toBe("claimed")
      expect((await store!.claimOperation(claimOn("acct-B", "b-1"))).outcome).toBe("claimed")
      expect((await store!.claimOperation(claimOn("acct-B", "b-2"))).outcome).toBe("claimed")
      if (claimed.outcome !== "claimed") return
      await store!.recordAttemptFailure(claimed.operation, { leaseToken: claimed.lease.token, kind: "retryable", httpStatus: 429, retryAt: NOW + 60_000 })
      expect(await store!.getProviderLimit(A)).toMatchObject({ pausedUntil: NOW + 5_000 })
    }, false)
  })

  describe("the batch claim", () => {
    /** `count` due operations on `accountKey` (claimed at NOW, their leases lapsed by `clock`'s next setting). */
    const seedDue = async (store: Store, accountKey: string, prefix: string, count: number) => {
      for (let i = 0; i < count; i++) expect((await store.claimOperation(claimOn(accountKey, `${prefix}-${i}`))).outcome).toBe("claimed")
    }
    const idsOf = (claims: { readonly claimed: ReadonlyArray<{ readonly operation: { readonly operationID: string } }> }) =>
      claims.claimed.map((claim) => claim.operation.operationID)
    const LAPSED = NOW + POLICY.leaseMs

    it("leases nothing of a paused scope, and the paused backlog does not fill the batch", async () => {
      await withRunners(adapter, 2, async ([first, second], clock) => {
        // More paused rows ahead of B's than a batch reads in all its pages: only leaving them out of the read reaches B's.
        await seedDue(first!, "acct-A", "a", 24)
        await seedDue(first!, "acct-B", "b", 3)
        clock.set(LAPSED)
        await first!.pauseProvider({ ...A, until: LAPSED + 60_000, status: 429 })
        expect(idsOf(await second!.claimDueOperations({ limit: 2 }))).toEqual(["b-0", "b-1"])
        expect(idsOf(await second!.claimDueOperations({ limit: 3 }))).toEqual(["b-2"])
        await first!.pauseProvider({ connectorName: "gcal", until: LAPSED + 120_000 })
        clock.set(LAPSED + 60_000)
        expect(idsOf(await second!.claimDueOperations({ limit: 3 }))).toEqual([])
        clock.set(LAPSED + 120_000)
        expect(idsOf(await second!.claimDueOperations({ limit: 3 }))).toEqual(["a-0", "a-1", "a-10"])
      })
    })

    it("leases no more than a scope's room, and fills the batch from the other scopes", async () => {
      await withRunners(adapter, 2, async ([first, second], clock) => {
        await seedDue(first!, "acct-A", "a", 6)
        await seedDue(first!, "acct-B", "b", 3)
        clock.set(LAPSED)
        await first!.setProviderLimit({ ...A, maxInFlight: 2 })
        expect(idsOf(await second!.claimDueOperations({ limit: 4 }))).toEqual(["a-0", "a-1", "b-0", "b-1"])
        expect(idsOf(await first!.claimDueOperations({ limit: 4 }))).toEqual(["b-2"])
        expectLimited(await second!.claimOperation(claimOn("acct-A", "a-5")), A, "at-capacity", LAPSED + POLICY.leaseMs)
        await first!.setProviderLimit({ connectorName: "gcal", maxInFlight: 3 })
        await first!.setProviderLimit({ ...A, maxInFlight: null })
        clock.set(LAPSED + POLICY.leaseMs)
        expect(idsOf(await second!.claimDueOperations({ limit: 10 }))).toHaveLength(3)
      })
    })

    it("locks capped scopes in key order across pages: a scope that sorts before one it locked waits for the next batch", async () => {
      await withRunners(adapter, 2, async ([first, second], clock) => {
        await seedDue(first!, "acct-Z", "0-z", 2)
        await seedDue(first!, "acct-A", "1-a", 2)
        await seedDue(first!, "acct-B", "2-b", 2)
        clock.set(LAPSED)
        await first!.setProviderLimit({ connectorName: "gcal", accountKey: "acct-Z", maxInFlight: 1 })
        await first!.setProviderLimit({ ...A, maxInFlight: 5 })
        // Z's page fills Z; A's rows come after Z was locked and sort before it, so they wait; B's have no cap.
        expect(idsOf(await second!.claimDueOperations({ limit: 2 }))).toEqual(["0-z-0", "2-b-0"])
        expect(idsOf(await second!.claimDueOperations({ limit: 3 }))).toEqual(["1-a-0", "1-a-1", "2-b-1"])
      })
    })

    it("between owners: a paused owner's backlog is passed over, a capped one's trimmed, and the other owners served first", async () => {
      await withRunners(adapter, 1, async ([store], clock) => {
        // Owner 1's backlog on acct-A (older), owner 2's rows on acct-B.
        for (let i = 0; i < 6; i++) expect((await store!.claimOperation(claimInput({ accountKey: "acct-A", operationID: `a-${i}`, sourceID: `src-a-${i}`, ownerDID: "did:owner:1" }))).outcome).toBe("claimed")
        for (let i = 0; i < 3; i++) expect((await store!.claimOperation(claimInput({ accountKey: "acct-B", operationID: `b-${i}`, sourceID: `src-b-${i}`, ownerDID: "did:owner:2" }))).outcome).toBe("claimed")
        clock.set(LAPSED)
        await store!.pauseProvider({ ...A, until: LAPSED + 1_000 })
        expect(idsOf(await store!.claimDueOperations({ limit: 2 }))).toEqual(["b-0", "b-1"])
        clock.set(LAPSED + 1_000)
        await store!.setProviderLimit({ ...A, maxInFlight: 2 })
        // Owner 1's oldest two (its scope's room), owner 2's last between them.
        expect(idsOf(await store!.claimDueOperations({ limit: 5 }))).toEqual(["a-0", "b-2", "a-1"])
      })
    })

    it("batches racing from separate store instances lease no more than the cap together", async () => {
      await withRunners(adapter, 6, async (runners, clock) => {
        await seedDue(runners[0]!, "acct-A", "a", 30)
        await seedDue(runners[0]!, "acct-B", "b", 3)
        await runners[0]!.setProviderLimit({ ...A, maxInFlight: 3 })
        // Each round at the lapse of the last round's leases: the cap's room is 3 again.
        for (let round = 1; round <= 4; round++) {
          clock.set(NOW + round * POLICY.leaseMs)
          const batches = await Promise.all(runners.map((runner) => runner.claimDueOperations({ limit: 4 })))
          const ids = batches.flatMap(idsOf)
          expect(new Set(ids).size).toBe(ids.length)
          expect(ids.filter((id) => id.startsWith("a-")), JSON.stringify(batches.map(idsOf))).toHaveLength(3)
          expect(ids.filter((id) => id.startsWith("b-"))).toHaveLength(3)
        }
      })
    })
  })
})
