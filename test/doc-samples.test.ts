import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import {
  checkRunnerLoop,
  type CheckRunnerLoopOptions,
  type OpenCheckedStore,
  type ProviderClient,
  ProviderError,
  type RunnerLoop,
  type VerifierLoop
} from "@connector-store/testkit"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { openMemoryConnectorStore } from "@connector-store/memory-adapter"
import { FakeProvider } from "@connector-store/testkit/provider"
import { type Connector, startWorker } from "@connector-store/worker"
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { freshSqlitePath, pgDatabaseForFile } from "./support/databases.js"
import { propertyRuns } from "./support/runs.js"

// Every ```ts block of the READMEs (the root's and each package's) and docs/*.md is a module that type-checks
// against the packages (strict, exactOptionalPropertyTypes, NodeNext); a
// block fenced ```ts runnable is self-contained (memory or an in-memory
// SQLite) and runs, its own `expect`s included.

const root = fileURLToPath(new URL("..", import.meta.url))
const documents = [
  "README.md",
  ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`),
  ...readdirSync(join(root, "packages")).map((p) => `packages/${p}/README.md`).filter((f) => existsSync(join(root, f)))
]

interface Sample {
  readonly name: string
  readonly code: string
  readonly runnable: boolean
}

/** The ```ts blocks of `document`, named by file and line. */
export const samplesOf = (document: string, text: string): ReadonlyArray<Sample> => {
  const samples: Array<Sample> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```ts(?:\s+(\S+))?\s*$/.exec(lines[i]!)
    if (fence === null) continue
    const start = i + 1
    let end = start
    while (end < lines.length && !lines[end]!.startsWith("```")) end++
    samples.push({
      name: `${document}:${start}`,
      code: lines.slice(start, end).join("\n") + "\n",
      runnable: fence[1] === "runnable"
    })
    i = end
  }
  return samples
}

const samples = documents.flatMap((document) => samplesOf(document, readFileSync(join(root, document), "utf8")))
const fileOf = (sample: Sample) => join(root, "docs", `.sample-${sample.name.replace(/[^A-Za-z0-9]+/g, "-")}.ts`)

const config = join(root, "docs", ".sample-tsconfig.json")
const written: Array<string> = []

/** Writes every sample next to the docs (so the workspace's module resolution applies); removed after the run. */
const writeSamples = (): void => {
  for (const sample of samples) {
    writeFileSync(fileOf(sample), sample.code)
    written.push(fileOf(sample))
  }
  writeFileSync(config, JSON.stringify({
    extends: "../tsconfig.json",
    compilerOptions: { noUnusedLocals: false },
    include: [],
    files: samples.map((sample) => fileOf(sample))
  }))
  written.push(config)
}

/**
 * Type errors of every sample, by sample, from `tsc` with the workspace's
 * options (in a child process, so that the test worker stays responsive).
 */
const typeErrors = async (): Promise<ReadonlyMap<string, ReadonlyArray<string>>> => {
  const tsc = join(root, "node_modules/typescript/bin/tsc")
  const { failed, output } = await new Promise<{ failed: boolean; output: string }>((resolve) =>
    execFile(process.execPath, [tsc, "-p", config, "--pretty", "false"], { cwd: root }, (error, stdout, stderr) =>
      resolve({ failed: error !== null, output: `${stdout}${stderr}` })))
  const byFile = new Map(samples.map((sample) => [fileOf(sample), sample.name]))
  const errors = new Map<string, Array<string>>(samples.map((sample) => [sample.name, []]))
  let key = "(outside the samples)"
  for (const line of output.split("\n").filter((l) => l.trim() !== "")) {
    const match = /^(.*?)\((\d+),\d+\): (.*)$/.exec(line)
    // A line without a position continues the error before it.
    if (match !== null) key = byFile.get(join(root, match[1]!)) ?? "(outside the samples)"
    errors.set(key, [...errors.get(key) ?? [], match === null ? line : `line ${match[2]}: ${match[3]}`])
  }
  if (failed && [...errors.values()].every((list) => list.length === 0)) errors.set("(tsc failed)", [output])
  return errors
}

describe("the code samples of the README and docs/", () => {
  it("there are samples, and some of them run", () => {
    expect(samples.length).toBeGreaterThanOrEqual(6)
    expect(samples.filter((s) => s.runnable).length).toBeGreaterThanOrEqual(3)
  })

  it("every ```ts sample type-checks against the packages", async () => {
    const errors = await typeErrors()
    expect(Object.fromEntries([...errors].filter(([, list]) => list.length > 0))).toEqual({})
  }, 300_000)

  // A sample that reads CONNECTOR_STORE_DATABASE runs on its own SQLite file here (Postgres below).
  const database = process.env["CONNECTOR_STORE_DATABASE"]
  beforeAll(() => {
    delete process.env["CONNECTOR_STORE_DATABASE"]
    writeSamples()
  })
  afterAll(() => {
    if (database !== undefined) process.env["CONNECTOR_STORE_DATABASE"] = database
    for (const file of written) rmSync(file, { force: true })
  })

  for (const sample of samples.filter((s) => s.runnable)) {
    it(`${sample.name} runs`, async () => {
      await import(pathToFileURL(fileOf(sample)).href)
    })
  }
})

/** A deterministic random number source (mulberry32). */
const seededRandom = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** The one sample of `document` whose code contains `marker`. */
const sampleWith = (document: string, marker: string): Sample => {
  const found = samples.filter((s) => s.name.startsWith(`${document}:`) && s.code.includes(marker))
  expect(found.map((s) => s.name), `one sample of ${document} with ${marker}`).toHaveLength(1)
  return found[0]!
}

/** Imports `code` as a module written next to the docs (removed at once): what an app that copied it would run. */
const importCode = async (name: string, code: string): Promise<Record<string, unknown>> => {
  const file = join(root, "docs", `.sample-${name}-${process.pid}.ts`)
  writeFileSync(file, code)
  try {
    return await import(pathToFileURL(file).href) as Record<string, unknown>
  } finally {
    rmSync(file, { force: true })
  }
}

/** The loop of the runner-loops sample with `marker`: its code above `// The demo`, exporting `names`. */
const loopOfPage = async (marker: string, names: string): Promise<Record<string, unknown>> => {
  const sample = sampleWith("docs/runner-loops.md", marker)
  const demo = sample.code.indexOf("\n// The demo")
  expect(demo, "the sample marks where its demo begins").toBeGreaterThan(0)
  return importCode(`runner-loops-${names.replace(/\W+/g, "-")}`, `${sample.code.slice(0, demo)}\nexport { ${names} }\n`)
}

/** The testkit's provider errors as the runner-loops page's `ProviderError` (the same status and Retry-After). */
const asPageError = <A>(call: Promise<A>, PageError: new (status: unknown, retryAfterMs?: number) => Error): Promise<A> =>
  call.catch((error: unknown) => {
    throw error instanceof ProviderError ? new PageError(error.status, error.retryAfterMs) : error
  })

/**
 * The README's connector under `startWorker`, and the write-back and
 * verifier loops of docs/runner-loops.md, copied from the markdown as they
 * stand (a runner-loops loop is everything of its sample above `// The
 * demo`; the README's `declare const calendar` is the only line bound
 * here), each on the testkit's provider through the interface it is written
 * against; the loops checked by `checkRunnerLoop`.
 */
describe("the runner loops of the README and docs/runner-loops.md, as written, under checkRunnerLoop", () => {
  const pageLoop = async (): Promise<RunnerLoop> => {
    const module = await loopOfPage("async function writeBack(store: Store, provider: Provider, edit: Edit)", "ProviderError, writeBack")
    const writeBack = module["writeBack"] as (store: unknown, provider: unknown, edit: unknown) => Promise<unknown>
    const PageError = module["ProviderError"] as new (status: unknown, retryAfterMs?: number) => Error
    const provider = (client: ProviderClient) => ({
      create: (e: Parameters<ProviderClient["create"]>[0], id: string) => asPageError(client.create(e, { id }), PageError),
      update: (e: Parameters<ProviderClient["update"]>[0], ifMatch?: string) => asPageError(client.update(e, { ifMatch }), PageError),
      delete: (e: Parameters<ProviderClient["delete"]>[0]) => asPageError(client.delete(e), PageError),
      get: (id: string) => asPageError(client.get(id), PageError)
    })
    return (store, client, edit) => writeBack(store, provider(client), edit)
  }

  const pageVerifier = async (): Promise<VerifierLoop> => {
    const module = await loopOfPage("async function verifyDue(store: Store, provider: Provider", "verifyDue")
    const verifyDue = module["verifyDue"] as (store: unknown, provider: unknown, repair: unknown) => Promise<unknown>
    return (store, client, repair) => verifyDue(store, { get: (id: string) => client.get(id) }, repair)
  }

  it("the README's connector (updates and deletes), as written, under startWorker: each write applied once, none left attempted", async () => {
    const sample = sampleWith("README.md", "export const gcal: Connector")
    const bound = sample.code
      .replace(/^declare const calendar: .*$/m, "const calendar = (globalThis as { readmeCalendar?: never }).readmeCalendar!")
      .replace(/^declare const bodyOf: .*$/m, "const bodyOf = (documentID: string) => documentID")
    const random = seededRandom(11)
    const provider = new FakeProvider({
      retryAfterMs: 5,
      fates: () => {
        const r = random()
        return r < 0.1 ? "502-after-apply" : r < 0.2 ? "applied-no-answer" : r < 0.25 ? "lost" : r < 0.3 ? "503" : "ok"
      }
    })
    // The README's client over the fake provider: the operation's key is its document's (doc-n is edit-n's).
    const keyOfDocument = (documentID: string) => `did:example:laptop/edit-${documentID.slice(4)}`
    const documentOf = new Map<string, string>()
    const answer = (sent: Awaited<ReturnType<FakeProvider["write"]>>) => {
      if (sent.status === 200) return sent.entity
      if (sent.status === 204) return undefined
      throw new ProviderError(sent.status, sent.status === 429 ? sent.retryAfterMs : undefined)
    }
    ;(globalThis as { readmeCalendar?: unknown }).readmeCalendar = {
      update: async (id: string, body: string, options: { ifMatch?: string }) =>
        answer(await provider.write("worker", {
          key: keyOfDocument(body), op: "update", entityID: id, documentID: body, digest: `digest-${body.slice(4)}`,
          ...(options.ifMatch === undefined ? { reissue: null } : { ifMatch: options.ifMatch, reissue: "conditional-update" as const })
        })),
      delete: async (id: string) =>
        answer(await provider.write("worker", {
          key: keyOfDocument(documentOf.get(id)!), op: "delete", entityID: id, documentID: documentOf.get(id)!, reissue: null
        })),
      get: async (id: string) => provider.get("worker", id)
    }
    const { gcal } = await importCode("readme-connector", bound) as { gcal: Connector }
    const store = openMemoryConnectorStore({
      readWinner: (documentID) => `digest-${documentID.slice(4)}`,
      operationPolicy: { backoff: { baseDelayMs: 1, maxDelayMs: 2, jitter: "none" }, deferMs: 5 }
    })
    const count = 30
    try {
      for (let n = 0; n < count; n++) {
        const entity = provider.seed(`evt-${n}`, "old", `doc-${n}`)
        documentOf.set(entity.id, `doc-${n}`)
        const op = n % 3 === 0 ? "delete" as const : "update" as const
        await store.enqueueOperation({
          callerDID: "did:example:laptop", operationID: `edit-${n}`, ownerDID: `did:example:owner-${n % 4}`, connectorName: "gcal",
          model: "Event", op, accountKey: "alice", target: "calendars/primary", sourceID: entity.id, deterministicEventID: `local-${n}`,
          payloadHash: op === "delete" ? `deleted-${n}` : `digest-${n}`, documentID: `doc-${n}`,
          reissueIntent: op === "delete" ? { kind: "idempotent-delete" } : { kind: "conditional-update", ifMatch: entity.etag }
        })
      }
      const worker = startWorker(store, { connectors: { gcal }, concurrency: 4, verification: false, pollMs: 20 })
      const states = async () => Promise.all(Array.from({ length: count }, async (_, n) =>
        (await store.getOperation({ callerDID: "did:example:laptop", operationID: `edit-${n}` }))?.state))
      for (let tries = 0; (await states()).includes("attempted"); tries++) {
        expect(tries, "every operation final within 30 s").toBeLessThan(1_500)
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      await worker.stop()
      expect(provider.check()).toEqual([])
      const final = await states()
      expect(final.filter((state) => state === "reconcile_only").length).toBeLessThanOrEqual(Math.floor(count * 0.05))
      // A lookup settled the updates whose answers were lost; their writes applied once.
      expect(worker.stats().lookupsSettled).toBeGreaterThan(0)
    } finally {
      await store.close()
    }
  }, 120_000)

  it("docs/runner-loops.md's loop (creates, updates and deletes; watches due in 30 s) holds", async () => {
    const report = await checkRunnerLoop(await pageLoop())
    expect(report.runs).toBeGreaterThan(0)
  }, 120_000)

  it("docs/runner-loops.md's loop holds under a provider whose 404 and 410 may mean another thing", async () => {
    const options: CheckRunnerLoopOptions = { fates: ["ok", "404", "410", "503"], numRuns: 200, seed: 7 }
    expect((await checkRunnerLoop(await pageLoop(), options)).runs).toBe(200)
  }, 120_000)

  it("docs/runner-loops.md's verifier loop, as the check's verifier, holds with its write-back loop", async () => {
    const report = await checkRunnerLoop(await pageLoop(), { verifier: await pageVerifier() })
    expect(report.runs).toBeGreaterThan(0)
  }, 120_000)

  it("docs/runner-loops.md's loop holds over SQLite files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "doc-loop-"))
    let n = 0
    const onSqlite: OpenCheckedStore = ({ now, readWinner, operationPolicy }) =>
      openConnectorStore({ url: join(dir, `${++n}.sqlite`), now, readWinner, operationPolicy })
    try {
      expect((await checkRunnerLoop(await pageLoop(), { openStore: onSqlite, numRuns: 10 })).runs).toBe(10)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 120_000)
})

describe("the Effect loops of docs/runner-loops.md on Postgres", () => {
  it("run on a Postgres database of their own, with the database clock", async () => {
    const sample = sampleWith("docs/runner-loops.md", "process.env[\"CONNECTOR_STORE_DATABASE\"]")
    expect(sample.runnable).toBe(true)
    const before = process.env["CONNECTOR_STORE_DATABASE"]
    process.env["CONNECTOR_STORE_DATABASE"] = await pgDatabaseForFile()
    try {
      await importCode("effect-loops-postgres", sample.code)
    } finally {
      if (before === undefined) delete process.env["CONNECTOR_STORE_DATABASE"]
      else process.env["CONNECTOR_STORE_DATABASE"] = before
    }
  }, 120_000)
})

/**
 * The sync loop of docs/runner-loops.md, copied from the markdown as it
 * stands, run by several runners at once over one store whose clock jumps
 * past the sync lease between their steps (fast-check's scheduler releases
 * each page fetch, each runner's start and each jump in an order of its
 * drawing): a runner that lost its lease never writes the checkpoint back
 * over the new holder's, every sync ends as the loop says, and a calm sync
 * afterwards reads the feed to its end.
 */
describe("the sync loop of docs/runner-loops.md, as written, under runners racing for its lease", () => {
  type Page = { items: ReadonlyArray<{ id: string; digest: string }>; next: string; more: boolean }
  type SyncLoop = (store: unknown, feed: { changes(cursor: string | null): Promise<Page> }, ingest: (id: string, digest: string) => void) =>
    Promise<{ outcome: string }>
  const PAGES = 5
  const pageAt = (cursor: string | null): Page => {
    const n = cursor === null ? 0 : Number(cursor.slice(1))
    // Past the last page the feed has nothing new: the same cursor again.
    if (n >= PAGES) return { items: [], next: `p${n}`, more: false }
    return { items: [{ id: `evt-${n}`, digest: `title:${n}` }], next: `p${n + 1}`, more: n + 1 < PAGES }
  }
  const indexOf = (checkpoint: unknown): number => Number(String((checkpoint as { cursor?: unknown } | null)?.cursor ?? "p0").slice(1))

  const backends = {
    memory: (now: () => number) => openMemoryConnectorStore({ now, readWinner: () => null }),
    SQLite: (now: () => number) => openConnectorStore({ url: freshSqlitePath(), now, readWinner: () => null })
  }

  it.each([["memory", 100], ["SQLite", 40]] as const)("on %s", async (backend, runs) => {
    const module = await loopOfPage("async function sync(store: Store, feed: Feed", "sync, connector, owner, leaseMs")
    const sync = module["sync"] as SyncLoop
    const [connector, owner, leaseMs] = [module["connector"] as string, module["owner"] as string, module["leaseMs"] as number]
    await fc.assert(fc.asyncProperty(
      fc.scheduler(),
      fc.integer({ min: 2, max: 3 }),
      fc.array(fc.constantFrom("lapse", "lapse", "wait"), { minLength: 1, maxLength: 8 }),
      async (s, runners, world) => {
        let now = 1_700_000_000_000
        const store = await backends[backend](() => now)
        try {
          const written: Array<number> = []
          const watched = new Proxy(store, {
            get: (target, name) => {
              const value = (target as unknown as Record<PropertyKey, unknown>)[name]
              if (name !== "updateSyncProgress") return typeof value === "function" ? value.bind(target) : value
              return async (...args: Parameters<typeof store.updateSyncProgress>) => {
                const state = await target.updateSyncProgress(...args)
                written.push(indexOf(state.checkpoint))
                return state
              }
            }
          })
          const feed = { changes: (cursor: string | null) => s.schedule(Promise.resolve(pageAt(cursor)), `fetch ${cursor ?? "start"}`) }
          const ended = Promise.all(Array.from({ length: runners }, (_, i) =>
            s.schedule(Promise.resolve(), `runner${i + 1} starts`).then(() => sync(watched, feed, () => undefined))
              .then((r) => r.outcome, (error: unknown) => `rejected: ${String(error)}`)))
          const jumps = (async () => {
            for (const step of world) {
              await s.schedule(Promise.resolve(), step)
              if (step === "lapse") now += leaseMs + 1
            }
          })()
          await s.waitFor(Promise.all([ended, jumps]))
          const outcomes = await ended
          expect(outcomes.filter((o) => !["done", "busy", "lease-lost"].includes(o)), `${String(s)}`).toEqual([])
          // Fenced by the lease: the checkpoint only ever moves forward, whoever writes it.
          expect(written, `the checkpoints in the order written\n${String(s)}`).toEqual([...written].sort((a, b) => a - b))
          // Calm: every lease lapses; a sync reads the feed to its end.
          now += leaseMs + 1
          const calm = await sync(watched, { changes: async (cursor) => pageAt(cursor) }, () => undefined)
          expect(calm.outcome).toBe("done")
          expect(indexOf((await store.getSyncState(connector, owner))?.checkpoint)).toBe(PAGES)
        } finally {
          await store.close()
        }
      }
    ), { numRuns: propertyRuns(runs) })
  }, 180_000)
})

/**
 * The relist sweep of docs/runner-loops.md, copied from the markdown as it
 * stands, run by several sweepers at once over one store (fast-check's
 * scheduler releases each listing page and each sweeper's start in an
 * order of its drawing): only entities the provider deleted are deleted
 * locally, never one a listing had, and a calm sweep afterwards leaves
 * exactly those deleted. (A later run derives an applied deletion again,
 * its watch still tracking it, so the local delete is idempotent.)
 */
describe("the relist sweep of docs/runner-loops.md, as written, under sweepers racing", () => {
  type Listing = { items: ReadonlyArray<{ id: string; etag: string }>; next: string | null }
  type Sweep = (store: unknown, lister: { list(cursor: string | null): Promise<Listing> }, scope: unknown, deleteLocal: (sourceID: string) => void) =>
    Promise<ReadonlyArray<string>>
  const scope = { ownerDID: "did:example:alice", connectorName: "gcal", model: "Event", accountKey: "alice@example.com" }
  const ENTITIES = Array.from({ length: 6 }, (_, i) => `evt-${i}`)

  it.each([["memory", 60], ["SQLite", 20]] as const)("on %s", async (backend, runs) => {
    const sweep = (await loopOfPage("async function sweep(store: Store, lister: Lister", "sweep"))["sweep"] as Sweep
    await fc.assert(fc.asyncProperty(
      fc.scheduler(),
      fc.integer({ min: 2, max: 3 }),
      fc.subarray(ENTITIES, { maxLength: 2 }),
      async (s, sweepers, gone) => {
        const documents = new Map(ENTITIES.map((id) => [`doc-${id}`, `w-${id}`]))
        const store = backend === "memory"
          ? openMemoryConnectorStore({ readWinner: (id) => documents.get(id) ?? null })
          : await openConnectorStore({ url: freshSqlitePath(), readWinner: (id) => documents.get(id) ?? null })
        try {
          for (const id of ENTITIES) {
            const key = { callerDID: "did:example:laptop", operationID: `edit-${id}` }
            const claim = await store.claimOperation({
              ...key, ...scope, op: "update", target: "calendars/primary", sourceID: id, deterministicEventID: `local-${id}`,
              payloadHash: `sha256:${id}`, reissueIntent: { kind: "conditional-update", ifMatch: "etag-0" }, documentID: `doc-${id}`
            })
            if (claim.outcome !== "claimed") throw new Error(claim.outcome)
            await store.markOperationSent(key, { leaseToken: claim.lease.token })
            await store.finalizeOperationAndArmWatch(key, { leaseToken: claim.lease.token, sourceID: id, documentID: `doc-${id}`, watchDueAt: store.now() + 60_000 })
          }
          const present = ENTITIES.filter((id) => !gone.includes(id))
          const pageAt = (cursor: string | null): Listing => {
            const n = cursor === null ? 0 : Number(cursor)
            return { items: present.slice(n, n + 2).map((id) => ({ id, etag: `e-${id}` })), next: n + 2 < present.length ? String(n + 2) : null }
          }
          const deleted: Array<string> = []
          const deleteLocal = (sourceID: string) => {
            deleted.push(sourceID)
            documents.delete(`doc-${sourceID}`)
          }
          const lister = { list: (cursor: string | null) => s.schedule(Promise.resolve(pageAt(cursor)), `page ${cursor ?? "first"}`) }
          const ended = Promise.all(Array.from({ length: sweepers }, (_, i) =>
            s.schedule(Promise.resolve(), `sweeper${i + 1} starts`).then(() => sweep(store, lister, scope, deleteLocal))
              .then(() => "ended", (error: unknown) => `rejected: ${String(error)}`)))
          await s.waitFor(ended)
          expect((await ended).filter((o) => o !== "ended"), String(s)).toEqual([])
          // Calm: one more sweep finishes whatever a superseded or stale sweeper left.
          await sweep(store, { list: async (cursor) => pageAt(cursor) }, scope, deleteLocal)
          expect(deleted.filter((id) => !gone.includes(id)), `deleted although listed\n${String(s)}`).toEqual([])
          expect([...new Set(deleted)].sort()).toEqual([...gone].sort())
          expect([...documents.keys()].sort()).toEqual(present.map((id) => `doc-${id}`).sort())
        } finally {
          await store.close()
        }
      }
    ), { numRuns: propertyRuns(runs) })
  }, 180_000)
})
