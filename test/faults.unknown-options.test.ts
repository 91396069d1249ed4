import { OperationPolicy } from "@connector-store/core"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import * as Sql from "@connector-store/sql-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { rejectionOf } from "./faults.support.js"
import { freshSqlitePath } from "./support/databases.js"

/** A typo of an option, where it is refused, and the name the refusal suggests. */
const typos: ReadonlyArray<readonly [label: string, options: Record<string, unknown>, field: string, suggestion: string]> = [
  ["a misspelt winner reader", { readWiner: async () => null }, "options.readWiner", "did you mean readWinner?"],
  ["a reader spelt in another case", { readwinners: async () => ({}) }, "options.readwinners", "did you mean readWinners?"],
  ["a typo set to undefined", { operationPolicyy: undefined }, "options.operationPolicyy", "did you mean operationPolicy?"],
  ["a policy setting in the wrong case", { operationPolicy: { leaseMS: 1_000 } }, "options.operationPolicy.leaseMS", "did you mean leaseMs?"],
  [
    "a backoff setting without its unit",
    { operationPolicy: { backoff: { baseDelay: 50 } } },
    "options.operationPolicy.backoff.baseDelay",
    "did you mean baseDelayMs?"
  ],
  ["a name near no option", { retentionDays: 7 }, "options.retentionDays", "(known: "]
]

describe("an unknown open option is refused with InvalidInput naming it and the nearest known one, before anything opens", () => {
  for (const [label, options, field, suggestion] of typos) {
    it(`openConnectorStore refuses ${label}, creating no file`, async () => {
      const file = freshSqlitePath()
      const error = await rejectionOf(openConnectorStore({ url: file, ...options } as never))
      expect(error).toMatchObject({ _tag: "InvalidInput", method: "openConnectorStore", field })
      expect((error as Error).message).toContain(suggestion)
      expect(existsSync(file)).toBe(false)
    })

    it(`openMemoryConnectorStore refuses ${label}`, () => {
      let thrown: unknown
      try {
        openMemoryConnectorStore(options as never)
      } catch (error) {
        thrown = error
      }
      expect(thrown).toMatchObject({ _tag: "InvalidInput", method: "openMemoryConnectorStore", field })
      expect((thrown as Error).message).toContain(suggestion)
    })
  }

  it("openConnectorStore names the option in its message: method, field, and the suggestion", async () => {
    const error = await rejectionOf(openConnectorStore({ url: freshSqlitePath(), readWiner: () => null } as never))
    expect((error as Error).message).toBe(
      "openConnectorStore: options.readWiner is not an option of openConnectorStore; did you mean readWinner?"
    )
  })

  it("a Postgres URL with a typo is refused as InvalidInput, without trying to connect", async () => {
    const error = await rejectionOf(openConnectorStore({ url: "postgres://127.0.0.1:1/none", tablePrefx: "app_" } as never))
    expect(error).toMatchObject({ _tag: "InvalidInput", field: "options.tablePrefx" })
    expect((error as Error).message).toContain("did you mean tablePrefix?")
  })

  it("a backoff that is not an object is refused, not read as the defaults", async () => {
    const error = await rejectionOf(openConnectorStore({ url: freshSqlitePath(), operationPolicy: { backoff: 50 } } as never))
    expect(error).toMatchObject({ _tag: "InvalidInput", field: "options.operationPolicy.backoff", reason: "must be an object" })
  })

  it("every documented option together opens (the check knows them all)", async () => {
    const store = await openConnectorStore({
      url: freshSqlitePath(),
      tablePrefix: "every_",
      maxConnections: 2,
      busyTimeoutMs: 1_000,
      applicationName: "app",
      clock: "local",
      now: () => 1_000_000,
      readWinner: async () => null,
      readWinners: async () => ({}),
      operationPolicy: { leaseMs: 1_000, maxAttempts: 3, backoff: { baseDelayMs: 10, maxDelayMs: 100, jitter: "full" }, deferMs: 5 },
      observability: Layer.empty
    })
    await store.close()
    const memory = openMemoryConnectorStore({
      now: () => 1_000_000,
      readWinner: async () => null,
      readWinners: async () => ({}),
      operationPolicy: { leaseMs: 1_000 },
      observability: Layer.empty
    })
    await memory.close()
  })
})

describe("the Effect layers refuse unknown keys of their options too", () => {
  const built = <A, E>(layer: Layer.Layer<A, E>) => Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(layer))))

  it("Sql.layer refuses a misspelt connection option, and a Promise-store option it would ignore, creating no file", async () => {
    const file = freshSqlitePath()
    expect(await built(Sql.layer({ url: file, busyTimeout: 50 } as never))).toMatchObject({
      _tag: "InvalidInput",
      method: "layer",
      field: "options.busyTimeout",
      reason: "is not an option of layer; did you mean busyTimeoutMs?"
    })
    expect(await built(Sql.layer({ url: file, now: () => 0 } as never))).toMatchObject({ _tag: "InvalidInput", field: "options.now" })
    expect(existsSync(file)).toBe(false)
  })

  it("Sql.layer refuses a readers argument whose key names no reader", async () => {
    const file = freshSqlitePath()
    expect(await built(Sql.layer({ url: file }, { readWiner: () => Effect.succeed(null) } as never))).toMatchObject({
      _tag: "InvalidInput",
      method: "layer",
      field: "readers.readWiner",
      reason: "is not a winner reader; did you mean readWinner?"
    })
    expect(existsSync(file)).toBe(false)
  })

  it("Sql.layerClient refuses a misspelt option as a PersistenceError whose cause names it", async () => {
    const file = freshSqlitePath()
    expect(await built(Sql.layerClient({ url: file, aplicationName: "x" } as never))).toMatchObject({
      _tag: "PersistenceError",
      cause: { _tag: "InvalidInput", field: "aplicationName", reason: "is not an option of layerClient; did you mean applicationName?" }
    })
    expect(existsSync(file)).toBe(false)
  })

  it("OperationPolicy.layer refuses a setting that does not exist", async () => {
    expect(await built(OperationPolicy.layer({ maxAttempt: 3 } as never))).toMatchObject({
      _tag: "InvalidInput",
      method: "operationPolicy",
      field: "maxAttempt",
      reason: "is not a policy setting; did you mean maxAttempts?"
    })
  })
})
