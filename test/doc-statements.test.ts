import { existsSync } from "node:fs"
import { ConnectorStore } from "@connector-store/core"
import * as Memory from "@connector-store/memory-adapter"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { Effect, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { freshTempDir } from "./support/databases.js"

// The statements of the README and docs/ that are not code samples, held to
// what the packages do (docs/operations.md, docs/sync-state-and-auth.md,
// docs/architecture.md).

const watch = { ownerDID: "did:example:a", connectorName: "calendar", model: "Event", accountKey: "a@example.com", sourceID: "evt-1" }
const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => undefined, (error: unknown) => error)

describe("operations.md: a setting out of range", () => {
  it("the memory store's synchronous open throws InvalidInput naming the setting", () => {
    let thrown: unknown
    try {
      openMemoryConnectorStore({ operationPolicy: { maxAttempts: 0 } })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toMatchObject({ _tag: "InvalidInput", field: "options.operationPolicy.maxAttempts" })
  })

  it("openConnectorStore rejects with it and no store opens (no file is created)", async () => {
    const url = `${freshTempDir()}/policy.sqlite`
    const error = await rejection(openConnectorStore({ url, operationPolicy: { leaseMs: -1 } }))
    expect(error).toMatchObject({ _tag: "InvalidInput", field: "options.operationPolicy.leaseMs" })
    expect(existsSync(url)).toBe(false)
  })
})

describe("sync-state-and-auth.md: the code verifier", () => {
  const record = (codeVerifier: unknown) => ({
    state: "state-1",
    provider: "calendar",
    ownerDID: "did:example:a",
    codeVerifier,
    redirectURL: "https://app.example/callback",
    scopes: ["calendar"],
    expiresAt: 10_000
  })

  it("the Promise API takes a plain string; a bad one is refused by the RFC 7636 rule, not by a word about Redacted", async () => {
    const store = openMemoryConnectorStore({ now: () => 1_000 })
    const error = await rejection(store.createPendingAuth(record("too-short") as never))
    expect(error).toMatchObject({ _tag: "InvalidInput", method: "createPendingAuth", field: "record.codeVerifier" })
    expect((error as { reason: string }).reason).toContain("RFC 7636")
    expect((error as { reason: string }).reason).not.toContain("Redacted")
    await store.createPendingAuth(record("v".repeat(43)) as never)
    expect((await store.consumePendingAuth("state-1"))?.codeVerifier).toBe("v".repeat(43))
    await store.close()
  })

  it("the Effect API takes it Redacted; a plain string is refused saying so", async () => {
    const refused = await Effect.runPromise(
      Effect.flatMap(ConnectorStore, (s) => Effect.flip(s.createPendingAuth(record("v".repeat(43)) as never))).pipe(
        Effect.provide(Memory.layer())
      )
    )
    expect(refused).toMatchObject({ _tag: "InvalidInput", field: "record.codeVerifier" })
    expect((refused as { reason: string }).reason).toContain("Redacted")
    const stored = await Effect.runPromise(
      Effect.flatMap(ConnectorStore, (s) =>
        Effect.zipRight(s.createPendingAuth(record(Redacted.make("v".repeat(43))) as never), s.consumePendingAuth("state-1", { now: 1 }))).pipe(
          Effect.provide(Memory.layer())
        )
    )
    expect(stored._tag).toBe("Some")
  })
})

describe("architecture.md: Promise rejections", () => {
  it("a refused call and a storage failure reject with the store's tagged error", async () => {
    const store = openMemoryConnectorStore()
    expect(await rejection(store.armWatch({ ...watch, ownerDID: "" }, "manual", { dueAt: 0 }))).toMatchObject({ _tag: "InvalidInput" })
    await store.close()
    const unopenable = await rejection(openConnectorStore({ url: `${freshTempDir()}/no/such/folder/x.sqlite` }))
    expect(unopenable).toMatchObject({ _tag: "PersistenceError" })
  })
})
