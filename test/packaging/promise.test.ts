import { readFileSync } from "node:fs"
import * as core from "@connector-store/core"
import {
  IdempotencyConflict,
  InvalidInput,
  isStoreError,
  openConnectorStore,
  openMemoryConnectorStore,
  STORE_ERROR_TAGS,
  STORE_ERRORS,
  StoreSchemaNotReady
} from "@connector-store/promise"
import * as promiseEntry from "@connector-store/promise"
import * as sqlAdapter from "@connector-store/sql-adapter"
import { describe, expect, it } from "vitest"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "../support/databases.js"

// @connector-store/promise: the Promise API for an app on any Effect, or on none.
// The packed install (.ci/packed-install.mjs) runs it in an app on Effect 4 and
// in one without Effect; here: what it exports and how its rejections look.

interface Manifest {
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}
const manifestOf = (name: string): Manifest =>
  JSON.parse(readFileSync(new URL(`../../packages/${name}/package.json`, import.meta.url), "utf8")) as Manifest

/** The tagged error classes an entry exports, by `_tag`. */
const taggedErrorsOf = (entry: Record<string, unknown>): Map<string, unknown> => {
  const found = new Map<string, unknown>()
  for (const value of Object.values(entry)) {
    if (typeof value !== "function" || !(value.prototype instanceof Error)) continue
    const tag = (new (value as new(args: object) => { _tag?: unknown })({}))._tag
    if (typeof tag === "string") found.set(tag, value)
  }
  return found
}

const key = { callerDID: "did:example:app", operationID: "op-1" }
const claimInput = (payloadHash: string) => ({
  ...key,
  ownerDID: "did:example:owner",
  connectorName: "calendar",
  model: "Event",
  op: "update" as const,
  accountKey: "owner@example.com",
  target: "calendars/primary",
  sourceID: "src-1",
  deterministicEventID: "evt-1",
  payloadHash,
  reissueIntent: { kind: "conditional-update" as const, ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: "doc-1"
})

type PromiseStore = Pick<Awaited<ReturnType<typeof openConnectorStore>>, "claimOperation" | "armWatch" | "close">

/** The same key with another payload, and a bad identity: both rejected with a store error, `_tag` and `method` set. */
const expectTaggedRejections = async (store: PromiseStore): Promise<void> => {
  expect((await store.claimOperation(claimInput("sha256:a"))).outcome).toBe("claimed")
  const conflict: unknown = await store.claimOperation(claimInput("sha256:b")).catch((error: unknown) => error)
  expect(conflict).toBeInstanceOf(IdempotencyConflict)
  expect(conflict).toMatchObject({ _tag: "IdempotencyConflict", method: "claimOperation" })
  expect(isStoreError(conflict)).toBe(true)
  const bad: unknown = await store.armWatch({
    ownerDID: "",
    connectorName: "calendar",
    model: "Event",
    accountKey: "owner@example.com",
    sourceID: "src-1"
  }, "manual", { dueAt: 0 }).catch((error: unknown) => error)
  expect(bad).toBeInstanceOf(InvalidInput)
  expect(bad).toMatchObject({ _tag: "InvalidInput", method: "armWatch", field: "identity.ownerDID" })
  expect(bad).toBeInstanceOf(Error)
  expect(isStoreError(bad)).toBe(true)
}

describe("@connector-store/promise", () => {
  it("exports every tagged error class of the core and the SQL adapter, the same objects, under its tag", () => {
    const expected = new Map([...taggedErrorsOf(core), ...taggedErrorsOf(sqlAdapter)])
    expect(expected.size).toBeGreaterThan(20)
    expect(new Map(Object.entries(STORE_ERRORS))).toEqual(expected)
    for (const [tag, errorClass] of expected) expect((promiseEntry as Record<string, unknown>)[tag], tag).toBe(errorClass)
    expect([...STORE_ERROR_TAGS].sort()).toEqual([...expected.keys()].sort())
  })

  it("tells a store error from anything else that merely carries a _tag", () => {
    expect(isStoreError(new StoreSchemaNotReady({ method: "openConnectorStore", reason: "missing" } as never))).toBe(true)
    expect(isStoreError(Object.assign(new Error("look-alike"), { _tag: "InvalidInput" }))).toBe(false)
    expect(isStoreError({ _tag: "IdempotencyConflict" })).toBe(false)
    expect(isStoreError({ _tag: "toString" })).toBe(false)
    for (const value of [null, undefined, "InvalidInput", 42, new Error("plain")]) expect(isStoreError(value)).toBe(false)
  })

  it("carries its Effect 3 line as dependencies, the ranges the SQL adapter asks of its peers, and asks the app for none", () => {
    const promise = manifestOf("promise")
    const sql = manifestOf("sql-adapter")
    expect(promise.peerDependencies).toBeUndefined()
    for (const [name, range] of Object.entries(sql.peerDependencies ?? {})) {
      expect(promise.dependencies?.[name], name).toBe(range)
    }
    for (const name of ["core", "memory-adapter", "sql-adapter"]) {
      expect(promise.dependencies?.[`@connector-store/${name}`], name).toBe("^0.1.0")
    }
  })

  it("rejects with tagged errors on memory", async () => {
    const store = openMemoryConnectorStore()
    await expectTaggedRejections(store)
    await store.close()
  })

  it("rejects with tagged errors on SQLite", async () => {
    const store = await openConnectorStore({ url: freshSqlitePath() })
    try {
      await expectTaggedRejections(store)
    } finally {
      await store.close()
    }
  })

  it.skipIf(!pgAvailable)("rejects with tagged errors on Postgres", async () => {
    const store = await openConnectorStore({ url: await pgDatabaseForFile(), tablePrefix: freshPrefix() })
    try {
      await expectTaggedRejections(store)
    } finally {
      await store.close()
    }
  })

  it("rejects a bad open option with InvalidInput naming it, before anything opens", async () => {
    const refused: unknown = await openConnectorStore({ url: "" }).catch((error: unknown) => error)
    expect(isStoreError(refused)).toBe(true)
    expect(refused).toMatchObject({ _tag: "InvalidInput", method: "openConnectorStore", field: "options.url" })
  })
})

