import { ConnectorStore, type PersistenceError, type PromiseConnectorStore } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { claimFor, rejectionOf, sentOperation, sleep } from "./faults.support.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

/** The bound these stores run under: short, so a test sees it run out (longer on Postgres, whose calls take round trips). */
const CALL_TIMEOUT_MS = 400
const PG_CALL_TIMEOUT_MS = 1_000

/** How late past its bound a call may answer (timers, a loaded machine). */
const SLACK_MS = 1_500

type Store = PromiseConnectorStore<unknown> & { now(): number }

interface Backend {
  readonly name: string
  readonly callTimeoutMs: number
  readonly open: (options: { readonly readWinner: () => unknown; readonly callTimeoutMs: number }) => Promise<Store>
}

const backends: ReadonlyArray<Backend> = [
  { name: "memory", callTimeoutMs: CALL_TIMEOUT_MS, open: async (options) => openMemoryConnectorStore(options as never) as Store },
  { name: "SQLite", callTimeoutMs: CALL_TIMEOUT_MS, open: (options) => openConnectorStore({ url: freshSqlitePath(), ...options } as never) as Promise<Store> },
  ...(pgAvailable
    ? [{
      name: "Postgres",
      callTimeoutMs: PG_CALL_TIMEOUT_MS,
      open: async (options: Parameters<Backend["open"]>[0]) =>
        openConnectorStore({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix(), maxConnections: 2, ...options } as never) as Promise<Store>
    }]
    : [])
]

/** A reader that never answers while `stalled` is set. */
const stallable = () => {
  const state = { stalled: false }
  return { state, readWinner: () => state.stalled ? new Promise<never>(() => undefined) : "winner-1" }
}

/** Asserts `error` is the timeout of a call of `method` that ended within `bound`. */
const expectTimedOut = (error: unknown, method: string, elapsedMs: number, bound: number): void => {
  expect(error).toMatchObject({ _tag: "PersistenceError", reason: "timeout", method })
  expect((error as PersistenceError).message).toMatch(new RegExp(`^${method}: timeout`))
  expect(elapsedMs).toBeGreaterThanOrEqual(bound - 20)
  expect(elapsedMs).toBeLessThan(bound + SLACK_MS)
}

const timed = async (promise: Promise<unknown>): Promise<readonly [unknown, number]> => {
  const started = performance.now()
  const error = await rejectionOf(promise)
  return [error, performance.now() - started] as const
}

for (const backend of backends) {
  describe(`a winner reader that never answers, on ${backend.name}`, () => {
    const opened: Array<Store> = []
    const open = async () => {
      const reader = stallable()
      const store = await backend.open({ readWinner: reader.readWinner, callTimeoutMs: backend.callTimeoutMs })
      opened.push(store)
      return { store, reader }
    }
    afterAll(async () => {
      await Promise.all(opened.map((store) => store.close()))
    })

    it("Promise API: the call rejects with timeout within callTimeoutMs, nothing of it is written, and the store answers the next call", async () => {
      const { store, reader } = await open()
      const { key, finalize } = await sentOperation(store, "promise-stall")
      const before = await store.getOperation(key)

      reader.state.stalled = true
      const [error, elapsed] = await timed(store.finalizeOperationAndArmWatch(key, finalize))
      reader.state.stalled = false
      expectTimedOut(error, "finalizeOperationAndArmWatch", elapsed, backend.callTimeoutMs)

      expect(await store.getOperation(key)).toEqual(before)
      expect(await store.getWatch({ ...claimIdentity, sourceID: finalize.sourceID })).toBeNull()
      expect((await store.finalizeOperationAndArmWatch(key, finalize)).outcome).toBe("committed")
      expect(await store.getOperation(key)).toMatchObject({ state: "committed" })
    })

    it("Effect API: the call fails with timeout within callTimeoutMs, nothing of it is written, and the store answers the next call", async () => {
      const { store, reader } = await open()
      const { key, finalize } = await sentOperation(store, "effect-stall")
      const before = await store.getOperation(key)

      reader.state.stalled = true
      const [error, elapsed] = await timed(
        store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key, finalize)))
      )
      reader.state.stalled = false
      expectTimedOut(error, "finalizeOperationAndArmWatch", elapsed, backend.callTimeoutMs)

      expect(await store.getOperation(key)).toEqual(before)
      const retried = await store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key, finalize)))
      expect(retried.outcome).toBe("committed")
    })

    it("calls made while one is stuck on the reader are not held up past their own bound, and later calls are answered", async () => {
      const { store, reader } = await open()
      const stuck = await sentOperation(store, "stuck")
      const other = await sentOperation(store, "other")

      reader.state.stalled = true
      const first = timed(store.finalizeOperationAndArmWatch(stuck.key, stuck.finalize))
      const second = timed(store.finalizeOperationAndArmWatch(other.key, other.finalize))
      const [[firstError, firstElapsed], [secondError, secondElapsed]] = await Promise.all([first, second])
      reader.state.stalled = false
      expectTimedOut(firstError, "finalizeOperationAndArmWatch", firstElapsed, backend.callTimeoutMs)
      expectTimedOut(secondError, "finalizeOperationAndArmWatch", secondElapsed, backend.callTimeoutMs)

      expect((await store.finalizeOperationAndArmWatch(other.key, other.finalize)).outcome).toBe("committed")
      expect((await store.finalizeOperationAndArmWatch(stuck.key, stuck.finalize)).outcome).toBe("committed")
    })
  })
}

for (const backend of backends) {
  describe(`a winner reader that answers after the bound, on ${backend.name}`, () => {
    const opened: Array<Store> = []
    afterAll(async () => {
      await Promise.all(opened.map((store) => store.close()))
    })

    for (const api of ["Promise", "Effect"] as const) {
      it(`${api} API: the call rejects with timeout, and its late answer sends no statement: nothing of it is ever written`, async () => {
        const late = { ms: 0 }
        const store = await backend.open({
          readWinner: async () => {
            if (late.ms > 0) await sleep(late.ms)
            return "winner-1"
          },
          callTimeoutMs: backend.callTimeoutMs
        })
        opened.push(store)
        const { key, finalize } = await sentOperation(store, `late-${api}`)
        const before = await store.getOperation(key)

        late.ms = backend.callTimeoutMs * 2
        const call = api === "Promise"
          ? store.finalizeOperationAndArmWatch(key, finalize)
          : store.runEffect(Effect.flatMap(ConnectorStore, (s) => s.finalizeOperationAndArmWatch(key, finalize)))
        const [error, elapsed] = await timed(call)
        late.ms = 0
        expectTimedOut(error, "finalizeOperationAndArmWatch", elapsed, backend.callTimeoutMs)
        // Past the reader's answer, and past whatever the program would have written after it.
        await sleep(backend.callTimeoutMs * 2)
        expect(await store.getOperation(key)).toEqual(before)
        expect(await store.getWatch({ ...claimIdentity, sourceID: finalize.sourceID })).toBeNull()
        expect((await store.finalizeOperationAndArmWatch(key, finalize)).outcome).toBe("committed")
      })
    }
  })
}

const claimIdentity = {
  ownerDID: "did:owner:faults",
  connectorName: "gcal",
  model: "Event",
  accountKey: "acct-1"
}

describe("callTimeoutMs and closeTimeoutMs as open options", () => {
  it("the memory store refuses a callTimeoutMs that is not a positive whole number, naming it", () => {
    for (const bad of [0, -1, 1.5, "30000"]) {
      expect(() => openMemoryConnectorStore({ callTimeoutMs: bad as never })).toThrow(
        expect.objectContaining({ _tag: "InvalidInput", method: "openMemoryConnectorStore", field: "options.callTimeoutMs" })
      )
    }
    expect(() => openMemoryConnectorStore({ closeTimeoutMs: -1 })).toThrow(
      expect.objectContaining({ _tag: "InvalidInput", field: "options.closeTimeoutMs" })
    )
  })
})

describe("a damaged SQLite file", () => {
  it("opening a file whose pages are damaged rejects with reason corrupt (SQLITE_CORRUPT), naming the method", async () => {
    const { openSync, writeSync, closeSync, statSync } = await import("node:fs")
    const path = freshSqlitePath()
    const first = await openConnectorStore({ url: path })
    for (let i = 0; i < 40; i++) {
      const claim = await first.claimOperation(claimFor(`page-${i}`, { payloadHash: `hash-${"x".repeat(200)}-${i}` }))
      expect(claim.outcome).toBe("claimed")
    }
    await first.close()
    // Every page after the first two overwritten with garbage (the header stays readable).
    const size = statSync(path).size
    const fd = openSync(path, "r+")
    const garbage = Buffer.alloc(size - 8192, 0xa5)
    writeSync(fd, garbage, 0, garbage.length, 8192)
    closeSync(fd)
    // Opening reads the schema's pages first: the damage is found there.
    const failure = await rejectionOf(openConnectorStore({ url: path }))
    expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "corrupt", method: "openConnectorStore" })
  })
})
