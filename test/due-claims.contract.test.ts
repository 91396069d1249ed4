import {
  type ConnectorOperation,
  MAX_DUE_CLAIMS,
  OperationRepository,
  type ProjectionWatch,
  type PromiseConnectorStore,
  StoreSnapshot,
  WatchRepository
} from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Option } from "effect"
import Sqlite from "better-sqlite3"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { identityOfRow, NOW, watchRow } from "./support/contract/fixtures.js"
import { attemptedRow } from "./operations.fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"

// The batch claims (claimDueOperations, claimDueWatches) on every adapter:
// they take due rows fair between owners, one owner's oldest first, each as
// a claim of its key would; workers claiming at once never get the same row;
// a lapsed batch comes back; bad input changes nothing; on Postgres a row
// another transaction holds is passed over, not waited for.

const adapters = await adaptersUnderTest()

type Store = PromiseConnectorStore<unknown>

const LEASE_MS = 30_000
const POLICY = { leaseMs: LEASE_MS, maxAttempts: 3 }

/** A clock the test moves, shared by every store it opens. */
const clock = () => {
  let now = NOW
  return { now: () => now, set: (t: number) => void (now = t) }
}

/** `count` stores on one fresh database of `adapter` (the memory adapter's one store `count` times). */
const storesOn = async (adapter: (typeof adapters)[number], count: number, now: () => number): Promise<ReadonlyArray<Store>> => {
  if (adapter.name === "memory") {
    const store = openMemoryConnectorStore({ now, readWinner: () => "winner", operationPolicy: POLICY }) as unknown as Store
    return Array.from({ length: count }, () => store)
  }
  const connection = await adapter.connection()
  const stores: Array<Store> = []
  for (let i = 0; i < count; i++) {
    stores.push(await openConnectorStore({ ...connection, now, readWinner: () => "winner", operationPolicy: POLICY }) as unknown as Store)
  }
  return stores
}

/** Runs one statement on the database with the raw driver. */
const rawRun = async (adapter: string, connection: { readonly url: string }, statement: string) => {
  if (adapter === "sqlite") {
    const db = new Sqlite(connection.url)
    try {
      db.prepare(statement).run()
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: connection.url })
  await client.connect()
  try {
    await client.query(statement)
  } finally {
    await client.end()
  }
}

const closeAll = async (stores: ReadonlyArray<Store>) => {
  for (const store of new Set(stores)) await store.close()
}

/** An attempted operation of its own key and node, due at `nextAttemptAt`. */
const due = (operationID: string, nextAttemptAt: number | null, patch: Partial<ConnectorOperation> = {}): ConnectorOperation =>
  attemptedRow({
    callerDID: "did:caller:1",
    operationID,
    nodeKey: `node-${operationID}`,
    nextAttemptAt,
    version: 1,
    attempts: 0,
    ...patch
  })

const seed = (store: Store, ...rows: ReadonlyArray<ConnectorOperation>) =>
  store.runEffect(Effect.flatMap(OperationRepository, (repo) =>
    Effect.forEach(rows, (row) =>
      Effect.flatMap(repo.insert(row), (inserted) => inserted ? Effect.void : Effect.dieMessage(`seed refused ${row.operationID}`)))))

const stored = (store: Store, operationID: string) =>
  store.runEffect(Effect.map(
    Effect.flatMap(OperationRepository, (repo) => repo.get({ callerDID: "did:caller:1", operationID })),
    Option.getOrThrow
  ))

const snapshot = (store: Store) => store.runEffect(Effect.flatMap(StoreSnapshot, (s) => s.snapshot))

const ids = (rows: ReadonlyArray<{ readonly operation: ConnectorOperation } | ConnectorOperation>) =>
  rows.map((row) => "operation" in row ? row.operation.operationID : row.operationID)

/** Each call of `method` with one of `cases`' parameters fails with InvalidInput naming its field; none changes a row. */
const refusesEach = async (
  store: Store,
  method: "claimDueOperations" | "claimDueWatches",
  cases: ReadonlyArray<readonly [params: unknown, field: string]>
) => {
  const before = await snapshot(store)
  for (const [params, field] of cases) {
    await expect(store[method](params as never), JSON.stringify(params)).rejects.toMatchObject({ _tag: "InvalidInput", method, field })
  }
  expect(await snapshot(store)).toEqual(before)
}

/** Every store takes batches (`take`) at once until one comes back empty: what each batch held, all stores together. */
const drainAtOnce = async (stores: ReadonlyArray<Store>, take: (store: Store) => Promise<ReadonlyArray<string>>) =>
  (await Promise.all(stores.map(async (store) => {
    const mine: Array<string> = []
    for (let batch = await take(store); batch.length > 0; batch = await take(store)) mine.push(...batch)
    return mine
  }))).flat()

/** A pending watch of its own source and document, due at `nextAttemptAt`. */
const dueWatch = (sourceID: string, nextAttemptAt: number | null, patch: Partial<ProjectionWatch> = {}): ProjectionWatch =>
  watchRow({ sourceID, documentID: `doc-${sourceID}`, nextAttemptAt, ...patch })

const seedWatches = (store: Store, ...rows: ReadonlyArray<ProjectionWatch>) =>
  store.runEffect(Effect.flatMap(WatchRepository, (repo) =>
    Effect.forEach(rows, (row) =>
      Effect.flatMap(repo.insert(row), (inserted) => inserted ? Effect.void : Effect.dieMessage(`seed refused ${row.sourceID}`)))))

const storedWatch = (store: Store, sourceID: string) =>
  store.runEffect(Effect.map(
    Effect.flatMap(WatchRepository, (repo) => repo.get(identityOfRow(dueWatch(sourceID, null)))),
    Option.getOrThrow
  ))

describe.each(adapters)("claimDueWatches on $name", (adapter) => {
  it("claims the claimable watches oldest due first, at most limit, until `until`; the rest on the next call", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seedWatches(
        store,
        dueWatch("src-c", NOW - 10),
        dueWatch("src-a", NOW - 30),
        dueWatch("src-b", NOW - 20),
        dueWatch("src-now", NOW),
        dueWatch("src-later", NOW + 1),
        dueWatch("src-claimed", NOW - 40, { claimedUntil: NOW + 5 }),
        dueWatch("src-claim-lapsed", NOW - 35, { claimedUntil: NOW }),
        dueWatch("src-failed", NOW - 50, { verificationStatus: "repair_failed" }),
        dueWatch("src-verified", null, { verificationStatus: "verified" })
      )
      const first = await store.claimDueWatches({ now: NOW, until: NOW + 1_000, limit: 3 })
      expect(first.claimed.map((w) => w.sourceID)).toEqual(["src-claim-lapsed", "src-a", "src-b"])
      expect(first.corrupt).toEqual([])
      for (const watch of first.claimed) {
        expect(watch.claimedUntil).toBe(NOW + 1_000)
        expect(await storedWatch(store, watch.sourceID)).toEqual(watch)
      }
      const second = await store.claimDueWatches({ now: NOW, until: NOW + 1_000, limit: 10 })
      expect(second.claimed.map((w) => w.sourceID)).toEqual(["src-c", "src-now"])
      expect((await store.claimDueWatches({ now: NOW, until: NOW + 1_000, limit: 10 })).claimed).toEqual([])
      // A claimed watch is verified as a claimWatchAttempt's would be.
      const [one] = first.claimed as [ProjectionWatch]
      expect(await store.recordVerification(identityOfRow(one), {
        generation: one.repairGeneration, claimedUntil: NOW + 1_000, fetchedDigest: "winner", maxAttempts: 3, dueAt: NOW + 60_000
      })).toBe("verified")
      expect((await storedWatch(store, "src-claimed")).claimedUntil).toBe(NOW + 5)
      expect((await storedWatch(store, "src-failed")).claimedUntil).toBeNull()
    } finally {
      await closeAll(stores)
    }
  })

  it("workers claiming at once never get the same watch, and together get every one", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 4, time.now)
    try {
      const backlog = Array.from({ length: 90 }, (_, i) => dueWatch(`src-${String(i).padStart(3, "0")}`, NOW - 1_000 + (i % 5)))
      await seedWatches(stores[0]!, ...backlog)
      const all = await drainAtOnce(stores, async (store) =>
        (await store.claimDueWatches({ now: NOW, until: NOW + 60_000, limit: 6 })).claimed.map((w) => w.sourceID))
      expect(all.length).toBe(backlog.length)
      expect(new Set(all)).toEqual(new Set(backlog.map((w) => w.sourceID)))
    } finally {
      await closeAll(stores)
    }
  })

  it("refuses bad parameters with InvalidInput naming the field, changing nothing", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seedWatches(store, dueWatch("src-1", NOW - 1))
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [null, "params"],
        [{ until: NOW, limit: 1 }, "params.now"],
        [{ now: NOW, limit: 1 }, "params.until"],
        [{ now: NOW, until: Number.NaN, limit: 1 }, "params.until"],
        [{ now: NOW, until: NOW, limit: 0 }, "params.limit"],
        [{ now: NOW, until: NOW, limit: MAX_DUE_CLAIMS + 1 }, "params.limit"],
        [{ now: NOW, until: NOW, limit: 1, generation: 1 }, "params.generation"]
      ]
      await refusesEach(store, "claimDueWatches", cases)
    } finally {
      await closeAll(stores)
    }
  })
})

describe.each(adapters)("claimDueOperations on $name", (adapter) => {
  it("leases the due operations oldest first, at most limit, each under its own lease; the rest on the next call", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seed(
        store,
        due("op-c", NOW - 10),
        due("op-a", NOW - 30),
        due("op-unscheduled", null),
        due("op-b", NOW - 20),
        due("op-now", NOW),
        due("op-later", NOW + 1),
        due("op-committed", NOW - 50, { state: "committed" }),
        due("op-leased", NOW + 5_000, { leaseToken: "other-runner", leaseExpiresAt: NOW + 5_000 })
      )
      const first = await store.claimDueOperations({ limit: 3 })
      expect(ids(first.claimed)).toEqual(["op-unscheduled", "op-a", "op-b"])
      expect(first.finished).toEqual([])
      expect(first.corrupt).toEqual([])
      const tokens = new Set(first.claimed.map((claim) => claim.lease.token))
      expect(tokens.size).toBe(3)
      for (const claim of first.claimed) {
        expect(claim.created).toBe(false)
        expect(claim.reissue).toBeNull()
        expect(claim.lease.expiresAt).toBe(NOW + LEASE_MS)
        expect(await stored(store, claim.operation.operationID)).toEqual(claim.operation)
        expect(claim.operation).toMatchObject({ leaseToken: claim.lease.token, nextAttemptAt: NOW + LEASE_MS, leaseExpiresAt: NOW + LEASE_MS })
      }
      const second = await store.claimDueOperations({ limit: 10, leaseMs: 1_000 })
      expect(ids(second.claimed)).toEqual(["op-c", "op-now"])
      expect(second.claimed[0]!.lease.expiresAt).toBe(NOW + 1_000)
      expect(await store.claimDueOperations({ limit: 10 })).toEqual({ claimed: [], finished: [], corrupt: [] })
      expect((await stored(store, "op-later")).leaseToken).toBeNull()
      expect((await stored(store, "op-leased")).leaseToken).toBe("other-runner")
    } finally {
      await closeAll(stores)
    }
  })

  it("decides each row as a claim of its key would: a safe reissue in doubt, reconcile_only or dead when it cannot lease", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seed(
        store,
        // A lapsed run whose request may have landed: its marker is folded into the doubt.
        due("op-marked", NOW - 40, { sendMarker: "lapsed-run", leaseToken: "lapsed-run", leaseExpiresAt: NOW - 40, attempts: 1 }),
        due("op-reconcile", NOW - 30, { inDoubtSince: NOW - 100, reissueIntent: { kind: "reconcile" }, attempts: 1 }),
        due("op-exhausted", NOW - 20, { attempts: 3 }),
        due("op-exhausted-doubt", NOW - 10, { attempts: 3, inDoubtSince: NOW - 100 })
      )
      const batch = await store.claimDueOperations({ limit: 10 })
      expect(ids(batch.claimed)).toEqual(["op-marked"])
      expect(batch.claimed[0]!.reissue).toEqual({ kind: "conditional-update", ifMatch: "etag-0" })
      expect(batch.claimed[0]!.operation).toMatchObject({ inDoubtSince: NOW, sendMarker: null })
      expect(batch.finished.map((row) => [row.operationID, row.state])).toEqual([
        ["op-reconcile", "reconcile_only"],
        ["op-exhausted", "dead"],
        ["op-exhausted-doubt", "reconcile_only"]
      ])
      for (const row of batch.finished) expect(await stored(store, row.operationID)).toEqual(row)
      expect(await store.claimDueOperations({ limit: 10 })).toEqual({ claimed: [], finished: [], corrupt: [] })
    } finally {
      await closeAll(stores)
    }
  })

  it("a batch lease is a claim's lease: its holder drives it; when it lapses another batch takes it over and fences the first", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 2, time.now)
    const [a, b] = stores as [Store, Store]
    try {
      await seed(a, due("op-1", NOW - 2), due("op-2", NOW - 1))
      const mine = await a.claimDueOperations({ limit: 2 })
      const [one, two] = mine.claimed as [typeof mine.claimed[0], typeof mine.claimed[0]]
      expect((await a.markOperationSent(one.operation, { leaseToken: one.lease.token })).outcome).toBe("sent")
      const committed = await a.finalizeOperationAndArmWatch(one.operation, {
        leaseToken: one.lease.token,
        sourceID: "src-1",
        documentID: "doc-1",
        providerEtag: "etag-1",
        resultEntity: { id: "src-1" },
        watchDueAt: NOW + 60_000
      })
      expect(committed.outcome).toBe("committed")
      // The second's holder stalls past its lease: another worker's batch takes it over.
      expect(await b.claimDueOperations({ limit: 5 })).toEqual({ claimed: [], finished: [], corrupt: [] })
      time.set(NOW + LEASE_MS)
      const theirs = await b.claimDueOperations({ limit: 5 })
      expect(ids(theirs.claimed)).toEqual(["op-2"])
      expect(theirs.claimed[0]!.lease.token).not.toBe(two.lease.token)
      expect((await a.markOperationSent(two.operation, { leaseToken: two.lease.token })).outcome).toBe("lease-lost")
      expect((await b.markOperationSent(two.operation, { leaseToken: theirs.claimed[0]!.lease.token })).outcome).toBe("sent")
    } finally {
      await closeAll(stores)
    }
  })

  it("workers claiming at once never get the same operation, and together get every one", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 4, time.now)
    try {
      const backlog = Array.from({ length: 120 }, (_, i) => due(`op-${String(i).padStart(3, "0")}`, NOW - 1_000 + (i % 7)))
      await seed(stores[0]!, ...backlog)
      const all = await drainAtOnce(stores, async (store) => ids((await store.claimDueOperations({ limit: 7 })).claimed))
      expect(all.length).toBe(backlog.length)
      expect(new Set(all).size).toBe(backlog.length)
      expect(new Set(all)).toEqual(new Set(ids(backlog)))
    } finally {
      await closeAll(stores)
    }
  })

  it("refuses bad parameters with InvalidInput naming the field, changing nothing", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seed(store, due("op-1", NOW - 1))
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [undefined, "params"],
        [null, "params"],
        [5, "params"],
        [{}, "params.limit"],
        [{ limit: 0 }, "params.limit"],
        [{ limit: 1.5 }, "params.limit"],
        [{ limit: "3" }, "params.limit"],
        [{ limit: MAX_DUE_CLAIMS + 1 }, "params.limit"],
        [{ limit: 1, leaseMs: 0 }, "params.leaseMs"],
        [{ limit: 1, leaseMs: 86_400_001 }, "params.leaseMs"],
        [{ limit: 1, lease: 5 }, "params.lease"]
      ]
      await refusesEach(store, "claimDueOperations", cases)
    } finally {
      await closeAll(stores)
    }
  })

  if (adapter.name !== "memory") {
    it("passes over due rows that cannot be decoded, reports them, and leases the healthy ones behind them", async () => {
      const time = clock()
      const connection = await adapter.connection()
      const stores = await storesOn({ ...adapter, connection: async () => connection }, 1, time.now)
      const store = stores[0]!
      try {
        await seed(store, due("op-bad-1", NOW - 50), due("op-bad-2", NOW - 40), due("op-bad-3", NOW - 30), due("op-a", NOW - 20), due("op-b", NOW - 10))
        await rawRun(adapter.name, connection, `UPDATE ${connection.tablePrefix ?? "kubun_connector_"}operation
          SET result_entity = 'not json {' WHERE operation_id LIKE 'op-bad-%'`)
        const first = await store.claimDueOperations({ limit: 1 })
        expect(ids(first.claimed)).toEqual(["op-a"])
        expect(first.corrupt.map((report) => `${report.key} ${report.column}`)).toEqual(
          ["op-bad-1", "op-bad-2", "op-bad-3"].map((id) => `did:caller:1/${id} result_entity`)
        )
        const second = await store.claimDueOperations({ limit: 5 })
        expect(ids(second.claimed)).toEqual(["op-b"])
        expect(second.corrupt).toHaveLength(3)
      } finally {
        await closeAll(stores)
      }
    })
  }

  if (adapter.name === "postgres") {
    it("passes over a due row another transaction holds locked instead of waiting for it", async () => {
      const time = clock()
      const connection = await adapter.connection()
      const stores = await storesOn({ ...adapter, connection: async () => connection }, 1, time.now)
      const store = stores[0]!
      const holder = new pg.Client({ connectionString: connection.url })
      await holder.connect()
      try {
        await seed(store, due("op-held", NOW - 2), due("op-free", NOW - 1))
        await holder.query("BEGIN")
        await holder.query(`SELECT 1 FROM ${connection.tablePrefix ?? ""}operation WHERE operation_id = 'op-held' FOR UPDATE`)
        const batch = await Promise.race([
          store.claimDueOperations({ limit: 5 }),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the batch waited on the held row")), 5_000))
        ])
        expect(ids(batch.claimed)).toEqual(["op-free"])
        await holder.query("ROLLBACK")
        expect(ids((await store.claimDueOperations({ limit: 5 })).claimed)).toEqual(["op-held"])
      } finally {
        await holder.end()
        await closeAll(stores)
      }
    })
  }
})

describe.each(adapters)("claimDueOperations between owners on $name", (adapter) => {
  /** `count` operations of `owner`, due from `dueFrom` a millisecond apart, ids `<prefix>-000`… */
  const backlog = (owner: string, prefix: string, count: number, dueFrom: number) =>
    Array.from({ length: count }, (_, i) => due(`${prefix}-${String(i).padStart(3, "0")}`, dueFrom + i, { ownerDID: owner }))
  const owners = (rows: ReadonlyArray<{ readonly operation: ConnectorOperation }>) => rows.map((row) => row.operation.ownerDID)

  it("one owner's older backlog does not fill the batch: every owner with due work gets its oldest row first", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seed(store, ...backlog("did:owner:a", "a", 50, NOW - 1_000), due("b-only", NOW - 1, { ownerDID: "did:owner:b" }))
      // a's oldest, b's, then a's next in the due order.
      expect(ids((await store.claimDueOperations({ limit: 5 })).claimed)).toEqual(["a-000", "b-only", "a-001", "a-002", "a-003"])
      // A single owner's batch is its rows in the due order, as before.
      expect(ids((await store.claimDueOperations({ limit: 4 })).claimed)).toEqual(["a-004", "a-005", "a-006", "a-007"])
      // The batch is full when the other owners run out of rows; the owners start after the last one the
      // previous batch visited (b, its row leased), so c comes before a.
      await seed(store, due("c-only", NOW - 2, { ownerDID: "did:owner:c" }))
      expect(ids((await store.claimDueOperations({ limit: 10 })).claimed)).toEqual(
        ["c-only", "a-008", "a-009", "a-010", "a-011", "a-012", "a-013", "a-014", "a-015", "a-016"]
      )
    } finally {
      await closeAll(stores)
    }
  })

  it("rotates past `limit` owners: each batch goes on after the last owner it visited, around, so every owner is reached", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      // Five owners of two due rows each; the first owners' rows are the oldest.
      const names = ["did:owner:1", "did:owner:2", "did:owner:3", "did:owner:4", "did:owner:5"]
      await seed(store, ...names.flatMap((owner, i) => backlog(owner, `o${i + 1}`, 2, NOW - 1_000 + i * 10)))
      const batches: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < 5; i++) batches.push(ids((await store.claimDueOperations({ limit: 2 })).claimed))
      expect(batches).toEqual([
        ["o1-000", "o2-000"],
        ["o3-000", "o4-000"],
        // Past the last owner, around to the first.
        ["o5-000", "o1-001"],
        ["o2-001", "o3-001"],
        ["o4-001", "o5-001"]
      ])
      expect((await store.claimDueOperations({ limit: 2 })).claimed).toEqual([])
    } finally {
      await closeAll(stores)
    }
  })

  it("an owner whose operations are all leased or scheduled later is passed over, not served in place of one with due work", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seed(
        store,
        due("a-leased", NOW + 5_000, { ownerDID: "did:owner:a", leaseToken: "other-runner", leaseExpiresAt: NOW + 5_000 }),
        due("b-later", NOW + 60_000, { ownerDID: "did:owner:b" }),
        ...backlog("did:owner:c", "c", 3, NOW - 100),
        due("d-due", NOW - 1, { ownerDID: "did:owner:d" })
      )
      const batch = await store.claimDueOperations({ limit: 3 })
      expect(ids(batch.claimed)).toEqual(["c-000", "d-due", "c-001"])
      expect(owners(batch.claimed)).toEqual(["did:owner:c", "did:owner:d", "did:owner:c"])
    } finally {
      await closeAll(stores)
    }
  })

  it("workers claiming at once over many owners never get the same operation, and together get every one", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 4, time.now)
    try {
      const rows = Array.from({ length: 9 }, (_, o) => backlog(`did:owner:${o}`, `o${o}`, 3 + o * 4, NOW - 1_000 + o)).flat()
      await seed(stores[0]!, ...rows)
      const all = await drainAtOnce(stores, async (store) => ids((await store.claimDueOperations({ limit: 5 })).claimed))
      expect(all.length).toBe(rows.length)
      expect(new Set(all)).toEqual(new Set(ids(rows)))
    } finally {
      await closeAll(stores)
    }
  })
})

describe.each(adapters)("claimDueWatches between owners on $name", (adapter) => {
  /** `count` pending watches of `owner`, due from `dueFrom` a millisecond apart, sources `<prefix>-000`… */
  const backlog = (owner: string, prefix: string, count: number, dueFrom: number) =>
    Array.from({ length: count }, (_, i) => dueWatch(`${prefix}-${String(i).padStart(3, "0")}`, dueFrom + i, { ownerDID: owner }))
  const sources = (rows: ReadonlyArray<ProjectionWatch>) => rows.map((row) => row.sourceID)
  const claim = async (store: Store, limit: number) =>
    (await store.claimDueWatches({ now: NOW, until: NOW + 60_000, limit })).claimed

  it("one owner's older backlog does not fill the batch: every owner with a claimable watch gets its oldest first", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seedWatches(store, ...backlog("did:owner:a", "a", 50, NOW - 1_000), dueWatch("b-only", NOW - 1, { ownerDID: "did:owner:b" }))
      // a's oldest, b's, then a's next in the due order.
      expect(sources(await claim(store, 5))).toEqual(["a-000", "b-only", "a-001", "a-002", "a-003"])
      // A single owner's batch is its watches in the due order.
      expect(sources(await claim(store, 4))).toEqual(["a-004", "a-005", "a-006", "a-007"])
      // The batch is full when the other owners run out of watches; the owners start after the last one
      // the previous batch visited (b, its watch claimed), so c comes before a.
      await seedWatches(store, dueWatch("c-only", NOW - 2, { ownerDID: "did:owner:c" }))
      expect(sources(await claim(store, 10))).toEqual(
        ["c-only", "a-008", "a-009", "a-010", "a-011", "a-012", "a-013", "a-014", "a-015", "a-016"]
      )
    } finally {
      await closeAll(stores)
    }
  })

  it("rotates past `limit` owners on a rotation of its own: each batch goes on after the last owner it visited", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      // Five owners of two due watches each; the first owners' are the oldest. The same owners have due
      // operations, whose batches in between move the operations' rotation only.
      const names = ["did:owner:1", "did:owner:2", "did:owner:3", "did:owner:4", "did:owner:5"]
      await seedWatches(store, ...names.flatMap((owner, i) => backlog(owner, `o${i + 1}`, 2, NOW - 1_000 + i * 10)))
      await seed(store, ...names.map((owner, i) => due(`op-${i + 1}`, NOW - 1_000, { ownerDID: owner })))
      const batches: Array<ReadonlyArray<string>> = []
      for (let i = 0; i < 5; i++) {
        batches.push(sources(await claim(store, 2)))
        expect((await store.claimDueOperations({ limit: 1 })).claimed.map((c) => c.operation.ownerDID)).toEqual([names[i]])
      }
      expect(batches).toEqual([
        ["o1-000", "o2-000"],
        ["o3-000", "o4-000"],
        // Past the last owner, around to the first.
        ["o5-000", "o1-001"],
        ["o2-001", "o3-001"],
        ["o4-001", "o5-001"]
      ])
      expect(await claim(store, 2)).toEqual([])
    } finally {
      await closeAll(stores)
    }
  })

  it("an owner whose watches are all claimed, scheduled later or settled is passed over, not served in place of one with due work", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 1, time.now)
    const store = stores[0]!
    try {
      await seedWatches(
        store,
        ...backlog("did:owner:a", "a-claimed", 3, NOW - 500).map((row) => ({ ...row, claimedUntil: NOW + 5_000 })),
        dueWatch("b-later", NOW + 60_000, { ownerDID: "did:owner:b" }),
        dueWatch("bb-failed", NOW - 50, { ownerDID: "did:owner:bb", verificationStatus: "repair_failed" }),
        dueWatch("bc-verified", null, { ownerDID: "did:owner:bc", verificationStatus: "verified" }),
        ...backlog("did:owner:c", "c", 3, NOW - 100),
        dueWatch("d-due", NOW - 1, { ownerDID: "did:owner:d" })
      )
      const batch = await claim(store, 3)
      expect(sources(batch)).toEqual(["c-000", "d-due", "c-001"])
      expect(batch.map((row) => row.ownerDID)).toEqual(["did:owner:c", "did:owner:d", "did:owner:c"])
      const failed = await store.runEffect(Effect.flatMap(WatchRepository, (repo) =>
        repo.get(identityOfRow(dueWatch("bb-failed", null, { ownerDID: "did:owner:bb" })))))
      expect(Option.getOrThrow(failed).claimedUntil).toBeNull()
    } finally {
      await closeAll(stores)
    }
  })

  it("workers claiming at once over many owners never get the same watch, and together get every one", async () => {
    const time = clock()
    const stores = await storesOn(adapter, 4, time.now)
    try {
      const rows = Array.from({ length: 9 }, (_, o) => backlog(`did:owner:${o}`, `o${o}`, 3 + o * 4, NOW - 1_000 + o)).flat()
      await seedWatches(stores[0]!, ...rows)
      const all = await drainAtOnce(stores, async (store) => sources(await claim(store, 5)))
      expect(all.length).toBe(rows.length)
      expect(new Set(all)).toEqual(new Set(sources(rows)))
    } finally {
      await closeAll(stores)
    }
  })

  if (adapter.name === "postgres") {
    it("passes over a watch another transaction holds locked instead of waiting for it, and serves the owner's next", async () => {
      const time = clock()
      const connection = await adapter.connection()
      const stores = await storesOn({ ...adapter, connection: async () => connection }, 1, time.now)
      const store = stores[0]!
      const holder = new pg.Client({ connectionString: connection.url })
      await holder.connect()
      try {
        await seedWatches(store, ...backlog("did:owner:a", "a", 2, NOW - 10), dueWatch("b-only", NOW - 1, { ownerDID: "did:owner:b" }))
        await holder.query("BEGIN")
        await holder.query(`SELECT 1 FROM ${connection.tablePrefix ?? ""}projection_watch WHERE source_id = 'a-000' FOR UPDATE`)
        const batch = await Promise.race([
          claim(store, 5),
          new Promise<never>((_, reject) => setTimeout(() => reject(new Error("the batch waited on the held watch")), 5_000))
        ])
        expect(sources(batch)).toEqual(["a-001", "b-only"])
        await holder.query("ROLLBACK")
        expect(sources(await claim(store, 5))).toEqual(["a-000"])
      } finally {
        await holder.end()
        await closeAll(stores)
      }
    })
  }
})
