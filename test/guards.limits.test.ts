import { ConnectorStore, SyncStateRepository, type WatchIdentity } from "@connector-store/core"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { NOW, watchRow } from "./support/contract/fixtures.js"
import { at, failsChangingNothing, onFreshStore, seedWatches, storedWatch } from "./support/contract/store.js"
import { adaptersUnderTest } from "./support/stores.js"

// The same limits on every adapter, stated here on their own: an id is at
// most 512 bytes of UTF-8; no string that reaches a text column holds NUL or
// a lone surrogate. What memory takes, Postgres takes too.

const adapters = await adaptersUnderTest()

const ID_BYTES = 512
/** Ids of exactly the limit: ASCII, two-byte and four-byte characters. */
const LONGEST = ["x".repeat(ID_BYTES), "é".repeat(ID_BYTES / 2), "😀".repeat(ID_BYTES / 4)]
const utf8 = (s: string) => Buffer.byteLength(s, "utf8")
const overLimit = "x".repeat(ID_BYTES + 1)

const identityOf = (part: string): WatchIdentity => ({
  ownerDID: part,
  connectorName: part,
  model: part,
  accountKey: part,
  sourceID: part
})

for (const adapter of adapters) {
  describe(`identifier and text limits on ${adapter.name}`, () => {
    it.effect("a watch whose five key parts are each at the limit is stored and armed through the public API", () =>
      onFreshStore(adapter, { readWinner: () => Effect.succeed("w-2") }, Effect.gen(function*() {
        yield* at(NOW)
        const store = yield* ConnectorStore
        for (const [i, part] of LONGEST.entries()) {
          expect(utf8(part)).toBe(ID_BYTES)
          const identity = identityOf(part)
          const row = watchRow({ ...identity, documentID: `doc-${i}`, verificationStatus: "verified", nextAttemptAt: null })
          yield* seedWatches(row)
          expect(yield* store.armWatch(identity, "manual", { dueAt: NOW })).toBe("opened")
          expect(yield* storedWatch(identity)).toMatchObject({ ...identity, repairGeneration: row.repairGeneration + 1 })
        }
      })))

    it.effect("one byte over the limit is refused naming the field; a multi-byte id is measured in bytes", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const store = yield* ConnectorStore
        expect(yield* failsChangingNothing(store.setSyncState(overLimit, "did:o", { status: "idle", lastSyncedAt: "", entityCount: 0 })))
          .toMatchObject({ _tag: "InvalidInput", method: "setSyncState", field: "connectorName" })
        // 257 two-byte characters: 257 UTF-16 units, 514 bytes.
        expect(yield* failsChangingNothing(store.setSyncState("gcal", "é".repeat(257), { status: "idle", lastSyncedAt: "", entityCount: 0 })))
          .toMatchObject({ _tag: "InvalidInput", field: "ownerDID" })
        expect(yield* failsChangingNothing(store.getWatch(identityOf(overLimit))))
          .toMatchObject({ _tag: "InvalidInput", field: "identity.ownerDID" })
        expect(yield* failsChangingNothing(store.listWatchesByDocuments(["doc", "😀".repeat(129)])))
          .toMatchObject({ _tag: "InvalidInput", field: "documentIDs" })
        expect(yield* failsChangingNothing(store.createPendingAuth({
          state: overLimit,
          provider: "gcal",
          ownerDID: "did:o",
          codeVerifier: Redacted.make("v".repeat(43)),
          redirectURL: "https://app/cb",
          scopes: [],
          createdAt: NOW,
          expiresAt: NOW + 1
        }))).toMatchObject({ _tag: "InvalidInput", field: "record.state" })
      })))

    it.effect("NUL and lone surrogates are refused in ids and in text, naming the field, writing nothing", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const store = yield* ConnectorStore
        const idle = { status: "idle" as const, lastSyncedAt: "", entityCount: 0 }
        for (const bad of ["a\u0000b", "\u0000", "a\uD800b", "\uDC00"]) {
          expect(yield* failsChangingNothing(store.setSyncState(bad, "did:o", idle)), JSON.stringify(bad))
            .toMatchObject({ _tag: "InvalidInput", field: "connectorName" })
          expect(yield* failsChangingNothing(store.setSyncState("gcal", "did:o", { ...idle, lastSyncedAt: bad })))
            .toMatchObject({ _tag: "InvalidInput", field: "state.lastSyncedAt" })
          expect(yield* failsChangingNothing(store.setSyncState("gcal", "did:o", { ...idle, status: "error", error: bad })))
            .toMatchObject({ _tag: "InvalidInput", field: "state.error" })
          expect(yield* failsChangingNothing(store.getWatchByDocument(bad))).toMatchObject({ _tag: "InvalidInput", field: "documentID" })
        }
        // A well-formed surrogate pair is one character, and fine.
        expect(Option.isNone(yield* store.getWatchByDocument("doc-😀"))).toBe(true)
      })))

    it.effect("JSON payloads keep NUL and every character exactly: the store writes them as escaped JSON text", () =>
      onFreshStore(adapter, {}, Effect.gen(function*() {
        const store = yield* ConnectorStore
        const checkpoint = { cursor: "a\u0000b", "k\u0000": ["\u0000", "😀", "\uD800"] }
        yield* store.setSyncState("gcal", "did:o", { status: "idle", lastSyncedAt: "t", entityCount: 0, checkpoint })
        const stored = Option.getOrThrow(yield* (yield* SyncStateRepository).get({ connectorName: "gcal", ownerDID: "did:o" }))
        expect(stored.checkpoint).toEqual(checkpoint)
      })))
  })
}
