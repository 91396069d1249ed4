import { ConnectorStore, MAX_WORK_WAIT_MS, type PromiseConnectorStore, WatchRepository, type WorkWake } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import Database from "better-sqlite3"
import pg from "pg"
import { identityOf, watchRow } from "./support/contract/fixtures.js"
import { adaptersUnderTest } from "./support/stores.js"
import { claimInput } from "./operations.fixtures.js"

// Wake-ups (awaitWork) on every adapter: a wait ends when a commit leaves
// work runnable (another store on the same database, on SQLite one of this
// process's, on Postgres any), at once when one came since the caller's
// mark, after its timeout otherwise; close ends it; bad input is refused.

const adapters = await adaptersUnderTest()

type Store = PromiseConnectorStore<unknown>

/** Two stores on one database (the memory adapter's one store twice: it has no other way to share one). */
const twoStores = async (adapter: (typeof adapters)[number]): Promise<readonly [Store, Store]> => {
  if (adapter.name === "memory") {
    const store = openMemoryConnectorStore() as unknown as Store
    return [store, store]
  }
  const connection = await adapter.connection()
  const open = () => openConnectorStore({ ...connection, readWinner: () => null }) as Promise<unknown> as Promise<Store>
  const first = await open()
  return [first, await open()]
}

const closeBoth = async ([a, b]: readonly [Store, Store]) => {
  await a.close()
  if (b !== a) await b.close()
}

let inserted = 0
/** A watch that is due now, unclaimed and unsettled: runnable work, inserted through the store's port. */
const insertDueWatch = (store: Store) =>
  store.runEffect(Effect.flatMap(WatchRepository, (watches) =>
    watches.insert(watchRow({ ...identityOf({ sourceID: `due-${++inserted}` }), nextAttemptAt: Date.now() - 1, claimedUntil: null }))))

/** The wait's answer and how long it took. */
const timed = async (wait: Promise<WorkWake>) => {
  const started = performance.now()
  const wake = await wait
  return { wake, ms: performance.now() - started }
}

/** A wait that has begun waiting: the first answers at once, so the mark it gives is the one to wait from. */
const firstMark = async (store: Store) => {
  const first = await store.awaitWork({ since: 0, timeoutMs: 5_000 })
  expect(first.woken).toBe("notified")
  expect(first.mark).toBeGreaterThanOrEqual(1)
  return first.mark
}

describe.each(adapters)("awaitWork on $name", (adapter) => {
  it("answers the first wait at once, then waits its timeout when nothing is committed, keeping the mark", async () => {
    const stores = await twoStores(adapter)
    try {
      const mark = await firstMark(stores[0])
      const { wake, ms } = await timed(stores[0].awaitWork({ since: mark, timeoutMs: 150 }))
      expect(wake).toEqual({ woken: "timeout", mark })
      expect(ms).toBeGreaterThanOrEqual(140)
    } finally {
      await closeBoth(stores)
    }
  })

  it("wakes a wait when another store on the database commits runnable work, well before its timeout", async () => {
    const stores = await twoStores(adapter)
    try {
      const mark = await firstMark(stores[0])
      const waiting = timed(stores[0].awaitWork({ since: mark, timeoutMs: 20_000 }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await insertDueWatch(stores[1])
      const { wake, ms } = await waiting
      expect(wake.woken).toBe("notified")
      expect(wake.mark).toBeGreaterThan(mark)
      expect(ms).toBeLessThan(10_000)
    } finally {
      await closeBoth(stores)
    }
  })

  it("answers at once when work was committed after the mark and before the wait: no wake-up is lost", async () => {
    const stores = await twoStores(adapter)
    try {
      const mark = await firstMark(stores[0])
      await insertDueWatch(stores[1])
      // On Postgres the notification crosses the network: give it its moment, as a sweep between the two would.
      await new Promise((resolve) => setTimeout(resolve, adapter.name === "postgres" ? 300 : 0))
      const { wake, ms } = await timed(stores[0].awaitWork({ since: mark, timeoutMs: 20_000 }))
      expect(wake.woken).toBe("notified")
      expect(ms).toBeLessThan(1_000)
    } finally {
      await closeBoth(stores)
    }
  })

  it("ends a pending wait with StoreClosed when the store closes, without close waiting for it", async () => {
    const stores = await twoStores(adapter)
    const [store] = stores
    const mark = await firstMark(store)
    const waiting = store.awaitWork({ since: mark, timeoutMs: 60_000 }).then(
      () => "answered",
      (error: { readonly _tag?: string; readonly method?: string }) => `${error._tag}:${error.method}`
    )
    await new Promise((resolve) => setTimeout(resolve, 50))
    const started = performance.now()
    await closeBoth(stores)
    expect(performance.now() - started).toBeLessThan(5_000)
    expect(await waiting).toBe("StoreClosed:awaitWork")
    await expect(store.awaitWork({ since: mark, timeoutMs: 10 })).rejects.toMatchObject({ _tag: "StoreClosed", method: "awaitWork" })
  })

  it("refuses bad input with InvalidInput naming the field, and waits for nothing", async () => {
    const stores = await twoStores(adapter)
    try {
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ since: -1, timeoutMs: 10 }, "params.since"],
        [{ since: 1.5, timeoutMs: 10 }, "params.since"],
        [{ since: 0, timeoutMs: 0 }, "params.timeoutMs"],
        [{ since: 0, timeoutMs: MAX_WORK_WAIT_MS + 1 }, "params.timeoutMs"],
        [{ since: 0 }, "params.timeoutMs"],
        [{ since: 0, timeoutMs: 10, until: 5 }, "params.until"],
        [null, "params"]
      ]
      for (const [params, field] of cases) {
        await expect(stores[0].awaitWork(params as never), JSON.stringify(params)).rejects.toMatchObject({
          _tag: "InvalidInput",
          method: "awaitWork",
          field
        })
      }
    } finally {
      await closeBoth(stores)
    }
  })

  it.effect("is on the Effect API too, under the store's own name for its errors", () =>
    Effect.gen(function*() {
      const store = yield* ConnectorStore
      const first = yield* store.awaitWork({ since: 0, timeoutMs: 1_000 })
      expect(first.woken).toBe("notified")
      const later = yield* store.awaitWork({ since: first.mark, timeoutMs: 20 })
      expect(later).toEqual({ woken: "timeout", mark: first.mark })
      const refused = yield* Effect.flip(store.awaitWork({ since: first.mark, timeoutMs: -5 }))
      expect(refused).toMatchObject({ _tag: "InvalidInput", method: "awaitWork", field: "params.timeoutMs" })
    }).pipe(Effect.provide(adapter.layer({}))))
})

describe.each(adapters.filter((adapter) => adapter.name === "postgres"))("awaitWork's listener on $name", (adapter) => {
  it("sends nothing for the lifecycle's own writes: a new claim's lease is not runnable work", async () => {
    const stores = await twoStores(adapter)
    try {
      const mark = await firstMark(stores[0])
      const waiting = timed(stores[0].awaitWork({ since: mark, timeoutMs: 700 }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      const claim = await stores[1].claimOperation(claimInput())
      expect(claim.outcome).toBe("claimed")
      expect((await waiting).wake.woken).toBe("timeout")
    } finally {
      await closeBoth(stores)
    }
  })

  it("wakes its waits when its listening connection is cut, and listens again on the next wait", async () => {
    const stores = await twoStores(adapter)
    const { url } = await adapter.connection()
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    try {
      const mark = await firstMark(stores[0])
      const waiting = timed(stores[0].awaitWork({ since: mark, timeoutMs: 20_000 }))
      await new Promise((resolve) => setTimeout(resolve, 100))
      const cut = await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '%(listener)' AND pid <> pg_backend_pid()"
      )
      expect(cut.rowCount).toBeGreaterThanOrEqual(1)
      const { wake, ms } = await waiting
      expect(wake.woken).toBe("notified")
      expect(ms).toBeLessThan(10_000)
      // Listening again (after the retry delay): the reconnection itself is a notice, then commits wake as before.
      await new Promise((resolve) => setTimeout(resolve, 1_100))
      const again = await stores[0].awaitWork({ since: wake.mark, timeoutMs: 5_000 })
      expect(again.woken).toBe("notified")
      const next = timed(stores[0].awaitWork({ since: again.mark, timeoutMs: 20_000 }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await insertDueWatch(stores[1])
      expect((await next).wake.woken).toBe("notified")
    } finally {
      await admin.end()
      await closeBoth(stores)
    }
  })
})

describe.each(adapters.filter((adapter) => adapter.name === "sqlite"))("awaitWork on $name, beside another connection to the file", (adapter) => {
  it("wakes on another connection's commit (another process's), and a commit made between two waits wakes the next", async () => {
    const { url } = await adapter.connection() as { readonly url: string }
    const store = await openConnectorStore({ url, readWinner: () => null }) as unknown as Store
    const other = new Database(url)
    try {
      other.exec("CREATE TABLE IF NOT EXISTS other_app (x INTEGER)")
      const mark = await firstMark(store)
      const waiting = timed(store.awaitWork({ since: mark, timeoutMs: 20_000 }))
      await new Promise((resolve) => setTimeout(resolve, 50))
      other.prepare("INSERT INTO other_app (x) VALUES (1)").run()
      const { wake, ms } = await waiting
      expect(wake.woken).toBe("notified")
      expect(ms).toBeLessThan(5_000)

      // Committed while no wait was pending (the worker sweeping): the next wait from the mark answers at once.
      other.prepare("INSERT INTO other_app (x) VALUES (2)").run()
      const next = await timed(store.awaitWork({ since: wake.mark, timeoutMs: 20_000 }))
      expect(next.wake.woken).toBe("notified")
      expect(next.ms).toBeLessThan(5_000)
    } finally {
      other.close()
      await store.close()
    }
  })
})
