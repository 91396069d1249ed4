import * as Sql from "@connector-store/sql-adapter"
import { openConnectorStore, type SqlConnectorStore, SqliteConnection } from "@connector-store/sql-adapter"
import { SqlClient } from "@effect/sql/SqlClient"
import Database from "better-sqlite3"
import { closeSync, copyFileSync, existsSync, openSync, linkSync, renameSync, rmSync, statSync, symlinkSync, truncateSync, writeSync } from "node:fs"
import { basename, dirname, join, relative } from "node:path"
import { Context, Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { claimInput } from "./operations.fixtures.js"
import { freshSqlitePath } from "./support/databases.js"

// The SQLite file under a running store is the one it opened: deleted,
// replaced or truncated, the store refuses every later call with
// `database-replaced` instead of acknowledging writes no later open finds.

const rejection = (promise: Promise<unknown>): Promise<Record<string, unknown>> =>
  promise.then(
    (value) => ({ resolvedWith: value }),
    (error: unknown) => error as Record<string, unknown>
  )

/** Waits past the interval a connection checks its file at most once in, so the next commit is checked. */
const pastFileCheck = () => new Promise((resolve) => setTimeout(resolve, 2 * SqliteConnection.FILE_CHECK_INTERVAL_MS + 1))

const idle = (n: number) => ({ status: "idle" as const, lastSyncedAt: `t${n}`, entityCount: n })

/** A store on a fresh file with `writes` acknowledged sync states and one committed claim. */
const storeWithWrites = async (writes: number): Promise<{ readonly path: string; readonly store: SqlConnectorStore }> => {
  const path = freshSqlitePath()
  const store = await openConnectorStore({ url: path })
  for (let n = 0; n < writes; n++) await store.setSyncState("gcal", `did:owner:${n}`, idle(n))
  expect((await store.claimOperation(claimInput())).outcome).toBe("claimed")
  return { path, store }
}

/** Every call of `store`, a write, a hot-path claim and a read, rejects with `database-replaced`. */
const expectLost = async (store: SqlConnectorStore, reasons: ReadonlyArray<string> = ["database-replaced"]) => {
  for (
    const call of [
      () => store.setSyncState("gcal", "did:owner:after", idle(1)),
      () => store.claimOperation(claimInput({ operationID: "op-after" })),
      () => store.claimOperation(claimInput()),
      () => store.getSyncState("gcal", "did:owner:0")
    ]
  ) {
    const failure = await rejection(call())
    expect(failure).toMatchObject({ _tag: "PersistenceError" })
    expect(reasons).toContain(failure["reason"])
  }
}

const syncStatesIn = (path: string): number => {
  const raw = new Database(path, { readonly: true })
  try {
    return (raw.prepare("SELECT COUNT(*) AS n FROM kubun_connector_sync_state").get() as { n: number }).n
  } finally {
    raw.close()
  }
}

describe("SQLite file identity", () => {
  it("a file deleted under a running store: the next write rejects database-replaced, and so does every later call", async () => {
    const { path, store } = await storeWithWrites(5)
    try {
      const log = statSync(`${path}-wal`).size
      rmSync(path)
      await pastFileCheck()
      await expectLost(store)
      // Nothing reached the log after the deletion: no write was acknowledged into the lost file.
      expect(statSync(`${path}-wal`).size).toBe(log)
    } finally {
      await store.close()
    }
    // The store does not create the file again.
    expect(existsSync(path)).toBe(false)
  })

  it("a file deleted under a store is not created again by the next open while its log is left, so a replayed claim is not claimed again", async () => {
    const { path, store } = await storeWithWrites(1)
    rmSync(path)
    await store.close()
    // The log outlives the file: the next open refuses rather than start an empty database.
    expect(existsSync(`${path}-wal`)).toBe(true)
    const failure = await rejection(openConnectorStore({ url: path }))
    expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "database-replaced", method: "openConnectorStore" })
    expect(String(failure["driverMessage"])).toContain(`${path}-wal`)
    expect(existsSync(path)).toBe(false)
    // With the log removed too, the path holds nothing of the store: an open there is a first open,
    // and the store cannot tell it from one.
    rmSync(`${path}-wal`)
    rmSync(`${path}-shm`, { force: true })
    const fresh = await openConnectorStore({ url: path })
    try {
      expect((await fresh.claimOperation(claimInput())).outcome).toBe("claimed")
    } finally {
      await fresh.close()
    }
  })

  it("a file replaced by another database rejects database-replaced, and the replacement is not written", async () => {
    const { path, store } = await storeWithWrites(3)
    const other = freshSqlitePath()
    try {
      // The store's commits moved into its file, and its log emptied: a stale log would be read as the new file's.
      new Database(path).pragma("wal_checkpoint(TRUNCATE)")
      const donor = await openConnectorStore({ url: other })
      await donor.setSyncState("gcal", "did:owner:donor", idle(9))
      await donor.close()
      renameSync(other, path)
      await pastFileCheck()
      await expectLost(store)
      expect(statSync(`${path}-wal`).size).toBe(0)
    } finally {
      await store.close()
    }
    expect(syncStatesIn(path)).toBe(1)
  })

  it("a truncated file rejects database-replaced (or corrupt, for a page read before the check)", async () => {
    const { path, store } = await storeWithWrites(400)
    try {
      // Move every page out of the log into the file, so the file holds them.
      new Database(path).pragma("wal_checkpoint(TRUNCATE)")
      truncateSync(path, 8192)
      await pastFileCheck()
      // The first call may read a missing page (corrupt) before its commit would be checked; from then on every call says why.
      const failure = await rejection(store.setSyncState("gcal", "did:owner:after", idle(1)))
      expect(failure).toMatchObject({ _tag: "PersistenceError" })
      expect(["database-replaced", "corrupt"]).toContain(failure["reason"])
      // A file cut to more than the store last saw of it is told from one a checkpoint is still growing only
      // by what SQLite then finds missing: corrupt.
      await expectLost(store, ["database-replaced", "corrupt"])
    } finally {
      await store.close()
    }
  })

  it("a file truncated to nothing rejects database-replaced", async () => {
    const { path, store } = await storeWithWrites(2)
    try {
      truncateSync(path, 0)
      await pastFileCheck()
      await expectLost(store)
    } finally {
      await store.close()
    }
  })

  it("a file that grows, or shrinks whole (another process vacuums it), keeps working", async () => {
    const { path, store } = await storeWithWrites(2)
    try {
      for (let n = 0; n < 200; n++) await store.setSyncState("gcal", `did:owner:more-${n}`, idle(n))
      new Database(path).pragma("wal_checkpoint(TRUNCATE)")
      await store.setSyncState("gcal", "did:owner:last", idle(1))
      expect((await store.claimOperation(claimInput({ operationID: "op-2" }))).outcome).toBe("claimed")
      const raw = new Database(path)
      raw.exec("DELETE FROM kubun_connector_sync_state WHERE owner_did LIKE 'did:owner:more-%'")
      const before = statSync(path).size
      raw.exec("VACUUM")
      raw.pragma("wal_checkpoint(TRUNCATE)")
      raw.close()
      expect(statSync(path).size).toBeLessThan(before)
      await store.setSyncState("gcal", "did:owner:after-vacuum", idle(2))
      expect((await store.claimOperation(claimInput({ operationID: "op-3" }))).outcome).toBe("claimed")
    } finally {
      await store.close()
    }
    expect(syncStatesIn(path)).toBe(4)
  })
})

describe("one file under two names in one process", () => {
  it("a symbolic link, a hard link, a relative and an absolute path share one connection", async () => {
    const path = freshSqlitePath()
    const first = await openConnectorStore({ url: path })
    const symbolic = join(dirname(path), `${basename(path)}.symbolic`)
    const hard = join(dirname(path), `${basename(path)}.hard`)
    symlinkSync(path, symbolic)
    linkSync(path, hard)
    const others = await Promise.all(
      [symbolic, hard, relative(process.cwd(), path)].map((url) => openConnectorStore({ url, busyTimeoutMs: 5_000 }))
    )
    try {
      expect(SqliteConnection.sharedSqliteConnections(path)).toBe(4)
      await Promise.all([first, ...others].map((store, n) => store.setSyncState("gcal", `did:owner:${n}`, idle(n))))
      expect(await others[1]!.getSyncState("gcal", "did:owner:0")).toMatchObject({ entityCount: 0 })
    } finally {
      await Promise.all([first, ...others].map((store) => store.close()))
    }
    expect(SqliteConnection.sharedSqliteConnections(path)).toBe(0)
  })

  it("a transaction held open under one name does not freeze the event loop for a write under another", async () => {
    const path = freshSqlitePath()
    const hard = `${path}.hard`
    const store = await openConnectorStore({ url: path })
    linkSync(path, hard)
    const other = await openConnectorStore({ url: hard, busyTimeoutMs: 2_000 })
    let longestGap = 0
    let last = Date.now()
    const ticker = setInterval(() => {
      longestGap = Math.max(longestGap, Date.now() - last)
      last = Date.now()
    }, 10)
    try {
      // A transaction on the first name's connection that waits 300 ms between its statements.
      const held = Effect.runPromise(Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(Sql.layerClient({ url: path }))
        const sql = Context.get(context, SqlClient)
        yield* sql.withTransaction(Effect.zipRight(sql`SELECT 1`, Effect.sleep(300)))
      })))
      await new Promise((resolve) => setTimeout(resolve, 20))
      const started = Date.now()
      await other.setSyncState("gcal", "did:owner:other", idle(1))
      await held
      expect(Date.now() - started).toBeLessThan(1_500)
      expect(longestGap).toBeLessThan(250)
    } finally {
      clearInterval(ticker)
      await Promise.all([store.close(), other.close()])
    }
  })
})

describe("opening", () => {
  it("a file in a missing folder is database-missing naming the path", async () => {
    const path = join(freshSqlitePath(), "missing", "store.sqlite")
    const failure = await rejection(openConnectorStore({ url: path }))
    expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "database-missing" })
    expect(String(failure["driverMessage"])).toContain(path)
  })

  it("checkIntegrityOnOpen fails a damaged file with corrupt, and opens a sound one", async () => {
    const { path, store } = await storeWithWrites(300)
    await store.close()
    const sound = await openConnectorStore({ url: path, checkIntegrityOnOpen: true })
    await sound.close()
    // Overwrite a page in the middle of the file with garbage.
    const raw = new Database(path)
    const pageSize = raw.pragma("page_size", { simple: true }) as number
    raw.close()
    const damaged = `${path}.damaged`
    copyFileSync(path, damaged)
    const fd = openSync(damaged, "r+")
    writeSync(fd, Buffer.alloc(pageSize, 0x5a), 0, pageSize, pageSize * 3)
    closeSync(fd)
    const failure = await rejection(openConnectorStore({ url: damaged, checkIntegrityOnOpen: true }))
    expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "corrupt" })
  })
})
