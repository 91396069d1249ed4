import type { OperationKey } from "@connector-store/core"
import { immediatePacer, type Pacer } from "./scheduler.js"

/**
 * What happens to one write request on its way, chosen per request:
 *
 * - `ok`: applied and answered.
 * - refused before applying: `400`, `401`, `404`, `409`, `410`, `412`, `422`, `500`, `503`, and `429` (with a Retry-After).
 * - `502-after-apply`: applied, then answered 502.
 * - `applied-no-answer`: applied, never answered (the sender times out after the write landed).
 * - `lost`: never arrives (the sender times out; nothing applied).
 * - `offline`: never leaves (the network is down for this request).
 * - `grant-expires`: the OAuth grant expires as this request arrives: it and every request after it answer 401 until `renewGrant()`.
 *
 * A refusal the entity's own state calls for (404 unknown id, 410 deleted,
 * 409 taken id, 412 stale If-Match) wins over any fate that applies.
 */
export type RequestFate =
  | "ok"
  | "400"
  | "401"
  | "404"
  | "409"
  | "410"
  | "412"
  | "422"
  | "429"
  | "500"
  | "503"
  | "502-after-apply"
  | "applied-no-answer"
  | "lost"
  | "offline"
  | "grant-expires"

/** Every fate, for arbitraries. */
export const REQUEST_FATES: ReadonlyArray<RequestFate> = [
  "ok", "400", "401", "404", "409", "410", "412", "422", "429", "500", "503", "502-after-apply", "applied-no-answer", "lost", "offline",
  "grant-expires"
]

/** The fates under which the request was applied although its sender cannot know it (the ones that make a blind re-send a duplicate). */
export const IN_DOUBT_FATES: ReadonlyArray<RequestFate> = ["502-after-apply", "applied-no-answer", "lost"]

/** The kinds of write a provider takes. */
export type WriteOp = "create" | "update" | "delete"

/** A write request as a runner sends it. */
export interface WriteRequest {
  /** The operation's idempotency key, `callerDID/operationID`. */
  readonly key: string
  /** The kind of write. */
  readonly op: WriteOp
  /** The entity an update or a delete targets. */
  readonly entityID?: string | undefined
  /** A create's own id (deterministic create); absent, the provider picks one. */
  readonly providerID?: string | undefined
  /** A conditional write: applied only while the entity's etag is this one (else 412). */
  readonly ifMatch?: string | undefined
  /** The reissue this request was sent under, when it is exactly what the store's claim handed out; null for a plain send. */
  readonly reissue: "conditional-update" | "deterministic-create" | "idempotent-delete" | null
  /** The local document the write comes from. */
  readonly documentID?: string | null | undefined
  /** What the write sends (its payload's digest); a delete sends none. */
  readonly digest?: string | undefined
}

/** A provider entity. */
export interface ProviderEntity {
  /** Its provider id. */
  readonly id: string
  /** Its etag: a new one on every applied write. */
  readonly etag: string
  /** What the last write that applied sent. */
  readonly digest: string
  /** The local document whose write-back last wrote it, if any. */
  readonly documentID: string | null
}

/** What a runner sees of its request. */
export type WriteAnswer =
  | { readonly status: 200; readonly entity: ProviderEntity }
  | { readonly status: 204 }
  | { readonly status: 429; readonly retryAfterMs: number }
  | { readonly status: 400 | 401 | 404 | 409 | 410 | 412 | 422 | 500 | 502 | 503 }
  | { readonly status: "timeout" }
  | { readonly status: "offline" }

/** One request in the provider's append-only ledger. */
export interface LedgerEntry {
  /** Its number, from 1, in the order requests left. */
  readonly n: number
  /** The request as sent. */
  readonly request: WriteRequest
  /** The fate it met. */
  fate: RequestFate
  /** The runner that sent it. */
  readonly actor: string
  /** `in-flight` until it arrives; `lost` when it never will; `offline` when it never left. */
  arrival: "in-flight" | "arrived" | "lost" | "offline"
  /** True when it changed the provider's state. */
  applied: boolean
  /** A delete that found its entity already gone (404 or 410): applied once already, never twice. */
  alreadyGone: boolean
  /** The status it was answered with (or would have been, when its answer was lost). */
  status: WriteAnswer["status"] | null
  /** True when it arrived after its sender had given up waiting (timed out or crashed). */
  late: boolean
  /** When it applied: its place among the requests that applied, from 1 (absent in a ledger that did not record it). */
  appliedAs?: number | undefined
}

/** One broken provider-side invariant: its name and what broke it. */
export interface ProviderViolation {
  /** `no-double-apply`. */
  readonly invariant: "no-double-apply"
  /** The key, and the requests that applied it, in words. */
  readonly detail: string
}

/** What a runner's provider call rejects with: the status it answered, a timeout, or no network. */
export class ProviderError extends Error {
  /** Always `"ProviderError"`. */
  override readonly name = "ProviderError"
  constructor(
    /** The HTTP status, `timeout` (no answer) or `offline` (the request never left). */
    readonly status: number | "timeout" | "offline",
    /** The Retry-After of a 429, in ms. */
    readonly retryAfterMs?: number | undefined
  ) {
    super(`provider answered ${status}${retryAfterMs === undefined ? "" : ` (retry after ${retryAfterMs} ms)`}`)
  }
}

/** What a runner's write call sends: the operation's key, the entity it targets, and what it writes. */
export interface ProviderWrite extends OperationKey {
  /** The entity an update or a delete targets. */
  readonly sourceID?: string | null | undefined
  /** The local document the write comes from. */
  readonly documentID?: string | null | undefined
  /** What the write sends (the claim's `payloadHash` is a good one). */
  readonly payloadHash: string
}

/**
 * A provider as a runner's loop calls it: each write resolves with the
 * entity (or nothing, for a delete) and rejects with `ProviderError`. A
 * delete of an entity already deleted rejects with 404 or 410, which a loop
 * should treat as done.
 */
export interface ProviderClient {
  /** Creates the entity, under `options.id` when given (a deterministic create: a taken id is 409). */
  create(write: ProviderWrite, options?: { readonly id?: string | undefined }): Promise<ProviderEntity>
  /** Updates `write.sourceID`, conditionally on `options.ifMatch` when given (a stale one is 412). */
  update(write: ProviderWrite, options?: { readonly ifMatch?: string | undefined }): Promise<ProviderEntity>
  /** Deletes `write.sourceID` (404 unknown, 410 already deleted), conditionally on `options.ifMatch` when given. */
  delete(write: ProviderWrite, options?: { readonly ifMatch?: string | undefined }): Promise<void>
  /** The entity, or null when there is none (never existed, or deleted). */
  get(id: string): Promise<ProviderEntity | null>
  /** What the provider applied for this key (the newest applied write's entity), as a lookup by idempotency key finds it. */
  findByKey(key: OperationKey): Promise<ProviderEntity | null>
}

/** The options of a `FakeProvider`. */
export interface FakeProviderOptions {
  /** The fates of the requests in the order they leave; past its end, `ok`. A function is asked for each request. */
  readonly fates?: ReadonlyArray<RequestFate> | ((request: WriteRequest, n: number) => RequestFate) | undefined
  /** Where its events wait (see `Pacer`); every event at once by default. */
  readonly pacer?: Pacer | undefined
  /** The Retry-After of a 429, in ms (200 by default). */
  readonly retryAfterMs?: number | undefined
}

/** `callerDID/operationID`. */
export const keyOf = (key: OperationKey): string => `${key.callerDID}/${key.operationID}`

/**
 * A fake provider: entities with etags, tombstones of deleted ones, an
 * append-only ledger of every write request (its fate, whether it arrived,
 * applied, and arrived after its sender gave up), lookups by idempotency
 * key, a paged listing, an OAuth grant that expires and a network that goes
 * offline. Each request's departure, arrival and answer is a point of its
 * pacer, so under an `Interleaving` a request can land after its runner gave
 * up or died. `check()` names every write applied twice outside a sanctioned
 * reissue.
 */
export class FakeProvider {
  /** Every write request, in the order they left. */
  readonly ledger: Array<LedgerEntry> = []
  /** The live entities by id. */
  readonly entities = new Map<string, ProviderEntity>()
  /** The ids of deleted entities (a write to one is 410). */
  readonly deleted = new Set<string>()
  /** The pacer its events wait on. */
  readonly pacer: Pacer
  private serial = 0
  private fateIndex = 0
  private grantExpired = false
  private offlineFor = 0
  private applies = 0
  private readonly fates: FakeProviderOptions["fates"]
  private readonly retryAfterMs: number

  /** @internal `providerWithLedger`: the ledger's entries copied in, and this provider's own applies numbered after theirs. */
  static fromLedger(entries: ReadonlyArray<LedgerEntry>, options: FakeProviderOptions): FakeProvider {
    const provider = new FakeProvider(options)
    provider.ledger.push(...entries.map((entry) => ({ ...entry })))
    provider.applies = entries.reduce((most, entry) => Math.max(most, entry.appliedAs ?? 0), 0)
    return provider
  }

  constructor(options: FakeProviderOptions = {}) {
    this.pacer = options.pacer ?? immediatePacer()
    this.fates = options.fates
    this.retryAfterMs = options.retryAfterMs ?? 200
  }

  /** Puts an entity in place without a request (the world before the run). */
  seed(id: string, digest: string, documentID: string | null = null): ProviderEntity {
    const entity = { id, etag: `etag-${++this.serial}`, digest, documentID }
    this.entities.set(id, entity)
    this.deleted.delete(id)
    return entity
  }

  /** The grant expires now: every request answers 401 until `renewGrant()`. */
  expireGrant(): void {
    this.grantExpired = true
  }

  /** The user consented again: requests go through. */
  renewGrant(): void {
    this.grantExpired = false
  }

  /** True while the grant is expired. */
  get grantIsExpired(): boolean {
    return this.grantExpired
  }

  /** The next `requests` requests never leave (`offline`). */
  goOffline(requests = Number.POSITIVE_INFINITY): void {
    this.offlineFor = requests
  }

  /** The network is back. */
  comeOnline(): void {
    this.offlineFor = 0
  }

  private nextFate(request: WriteRequest, n: number): RequestFate {
    if (this.pacer.calm) return "ok"
    if (typeof this.fates === "function") return this.fates(request, n)
    return this.fates?.[this.fateIndex++] ?? "ok"
  }

  private apply(entry: LedgerEntry): WriteAnswer {
    const { request } = entry
    if (entry.fate === "grant-expires") this.grantExpired = true
    if (this.grantExpired) return { status: 401 }
    switch (entry.fate) {
      case "400": case "401": case "404": case "409": case "410": case "412": case "422": case "500": case "503":
        return { status: Number(entry.fate) as 400 }
      case "429":
        return { status: 429, retryAfterMs: this.retryAfterMs }
      default:
        break
    }
    if (request.op === "delete" || request.op === "update") {
      const id = request.entityID ?? ""
      const current = this.entities.get(id)
      if (current === undefined) {
        const status = this.deleted.has(id) ? 410 : 404
        if (request.op === "delete") entry.alreadyGone = true
        return { status }
      }
      if (request.ifMatch !== undefined && request.ifMatch !== current.etag) return { status: 412 }
      entry.applied = true
      if (request.op === "delete") {
        this.entities.delete(id)
        this.deleted.add(id)
        return entry.fate === "502-after-apply" ? { status: 502 } : { status: 204 }
      }
    } else {
      const id = request.providerID ?? `auto-${this.serial + 1}`
      if (this.entities.has(id) || this.deleted.has(id)) return { status: 409 }
      entry.applied = true
    }
    const id = request.op === "create" ? request.providerID ?? `auto-${this.serial + 1}` : request.entityID!
    const entity = { id, etag: `etag-${++this.serial}`, digest: request.digest ?? "", documentID: request.documentID ?? null }
    this.entities.set(id, entity)
    if (entry.fate === "502-after-apply") return { status: 502 }
    return { status: 200, entity }
  }

  /**
   * Sends `request` for `actor`: a point before it leaves (a crash there
   * means it never did), then its arrival (a provider point of its own,
   * which may come after the sender stopped waiting), then the answer or the
   * sender's timeout, whichever is released first, then a point after the
   * answer (a crash there loses it). Never rejects with the answer: it is
   * the resolved value.
   */
  async write(actor: string, request: WriteRequest): Promise<WriteAnswer> {
    const { pacer } = this
    await pacer.point(actor, `send ${describeRequest(request)}`)
    const entry: LedgerEntry = {
      n: this.ledger.length + 1,
      request,
      fate: "ok",
      actor,
      arrival: "in-flight",
      applied: false,
      alreadyGone: false,
      status: null,
      late: false
    }
    entry.fate = this.offlineFor > 0 ? "offline" : this.nextFate(request, entry.n)
    if (this.offlineFor > 0) this.offlineFor--
    this.ledger.push(entry)
    if (entry.fate === "offline") {
      entry.arrival = "offline"
      entry.status = "offline"
      pacer.record(actor, `request #${entry.n}`, "offline (never left)")
      await pacer.point(actor, `got answer of #${entry.n}`)
      return { status: "offline" }
    }
    let waiting = true
    let arrived = (): void => {}
    const arrival = new Promise<void>((resolve) => { arrived = resolve })
    const answered = entry.fate === "lost"
      ? new Promise<never>(() => {})
      : pacer.provider(`request #${entry.n} (${request.key}, ${entry.fate}) arrives`).then(() => {
        const answer = this.apply(entry)
        if (entry.applied) entry.appliedAs = ++this.applies
        entry.arrival = "arrived"
        entry.status = answer.status
        entry.late = !waiting
        pacer.note(`provider: #${entry.n} ${request.key} → ${answer.status}${entry.applied ? " applied" : ""}${entry.late ? " LATE" : ""}`)
        arrived()
        if (entry.fate === "applied-no-answer" && entry.applied) return new Promise<never>(() => {})
        return pacer.provider(`answer of #${entry.n} travels back`).then(() => answer)
      })
    if (entry.fate === "lost") {
      entry.arrival = "lost"
      arrived()
    }
    const never = new Promise<never>(() => {})
    const noAnswer = entry.fate === "lost" || entry.fate === "applied-no-answer"
    // Under a schedule the sender may stop waiting at any point; without one, only when no answer comes.
    const timeout = pacer.calm
      ? never
      : pacer.racesTimeouts === false
      ? noAnswer ? arrival.then((): WriteAnswer => ({ status: "timeout" })) : never
      : pacer.provider(`${actor} stops waiting for #${entry.n}`).then((): WriteAnswer => ({ status: "timeout" }))
    const answer = await Promise.race([answered, timeout])
    waiting = false
    pacer.record(actor, `answer of #${entry.n}`, String(answer.status))
    await pacer.point(actor, `got answer of #${entry.n}`)
    return answer
  }

  /** A GET of the entity (a point before and after; read when released). */
  async get(actor: string, id: string): Promise<ProviderEntity | null> {
    await this.pacer.point(actor, `GET ${id}`)
    const entity = this.entities.get(id) ?? null
    this.pacer.record(actor, `GET ${id}`, entity === null ? (this.deleted.has(id) ? "410" : "404") : `${entity.etag} ${entity.digest}`)
    await this.pacer.point(actor, `got ${id}`)
    return entity
  }

  /** What the provider applied for `key` (the newest applied write's entity), as a lookup by idempotency key finds it. */
  async lookup(actor: string, key: string): Promise<ProviderEntity | null> {
    await this.pacer.point(actor, `lookup ${key}`)
    const applied = this.ledger.filter((e) => e.request.key === key && e.applied).at(-1)
    const found = applied === undefined ? null : this.entityWritten(applied)
    this.pacer.record(actor, `lookup ${key}`, found === null ? "not applied" : found.id)
    await this.pacer.point(actor, `looked up ${key}`)
    return found
  }

  private entityWritten(entry: LedgerEntry): ProviderEntity | null {
    const { request } = entry
    if (request.op !== "create") return this.entities.get(request.entityID ?? "") ?? null
    const id = request.providerID ?? [...this.entities.values()].find((e) => e.digest === request.digest)?.id
    return id === undefined ? null : this.entities.get(id) ?? null
  }

  /** One page of the full listing in id order after `cursor`. */
  async list(actor: string, cursor: string | null, limit: number): Promise<{ items: ReadonlyArray<ProviderEntity>; next: string | null }> {
    await this.pacer.point(actor, `list after ${cursor ?? "start"}`)
    const ids = [...this.entities.keys()].sort().filter((id) => cursor === null || id > cursor)
    const items = ids.slice(0, limit).map((id) => this.entities.get(id)!)
    const page = { items, next: ids.length > limit ? items.at(-1)!.id : null }
    this.pacer.record(actor, `list after ${cursor ?? "start"}`, items.map((e) => e.id).join(",") + (page.next === null ? " (end)" : ""))
    await this.pacer.point(actor, `listed after ${cursor ?? "start"}`)
    return page
  }

  /** Someone edits the entity in the provider's own UI. */
  editElsewhere(id: string, digest: string): ProviderEntity | null {
    const current = this.entities.get(id)
    if (current === undefined) return null
    const entity = { ...current, etag: `etag-${++this.serial}`, digest }
    this.entities.set(id, entity)
    return entity
  }

  /** Someone deletes the entity at the provider. */
  deleteElsewhere(id: string): boolean {
    const had = this.entities.delete(id)
    if (had) this.deleted.add(id)
    return had
  }

  /** True while some request of `key` applied or may still arrive. */
  possiblyLanded(key: string): boolean {
    return this.ledger.some((e) => e.request.key === key && (e.applied || e.arrival === "in-flight"))
  }

  /** True while some request of `key` may still arrive. */
  inFlight(key: string): boolean {
    return this.ledger.some((e) => e.request.key === key && e.arrival === "in-flight")
  }

  /** The requests of `key` that applied. */
  appliedOf(key: string): ReadonlyArray<LedgerEntry> {
    return this.ledger.filter((e) => e.request.key === key && e.applied)
  }

  /** The documents some entity at the provider was last written from. */
  liveDocuments(): ReadonlySet<string> {
    return new Set([...this.entities.values()].flatMap((e) => e.documentID === null ? [] : [e.documentID]))
  }

  /**
   * Every write applied twice outside a sanctioned reissue: per key, the
   * requests that applied with no reissue (plain sends) must be at most
   * one. A sanctioned reissue cannot apply on top of an earlier write (its
   * If-Match is stale, its id taken), and a delete that finds its entity
   * gone (404/410) applied nothing: neither counts, unless a reissue did
   * apply on top of an earlier applied request of its key (by when each
   * applied). Keys in `startedOver`
   * (replayed after retention forgot them: new operations) are not judged.
   */
  check(options: { readonly startedOver?: ReadonlySet<string> | undefined } = {}): ReadonlyArray<ProviderViolation> {
    const plain = new Map<string, Array<LedgerEntry>>()
    for (const entry of this.ledger) {
      if (!entry.applied || entry.request.reissue !== null) continue
      plain.set(entry.request.key, [...(plain.get(entry.request.key) ?? []), entry])
    }
    const out: Array<ProviderViolation> = []
    for (const [key, entries] of plain) {
      if (entries.length < 2 || options.startedOver?.has(key) === true) continue
      out.push({
        invariant: "no-double-apply",
        detail: `${key} applied ${entries.length} times by requests that were not sanctioned reissues: ` +
          entries.map((e) => `#${e.n} ${e.request.op} by ${e.actor} (${e.fate}${e.late ? ", arrived after its sender gave up" : ""})`).join(", ")
      })
    }
    out.push(...reissuesOnTop(this.ledger, options.startedOver))
    return out
  }

  /**
   * A `ProviderClient` for `actor`: its writes go through `write` (and
   * reject with `ProviderError`), its reads through `get` and `lookup`.
   * `reissueOf` tells which reissue (if any) each request was sent under;
   * by default none (every request is judged plain).
   */
  client(actor: string, reissueOf: (request: Omit<WriteRequest, "reissue">) => WriteRequest["reissue"] = () => null): ProviderClient {
    const send = async (request: Omit<WriteRequest, "reissue">): Promise<WriteAnswer> => {
      const answer = await this.write(actor, { ...request, reissue: reissueOf(request) })
      if (answer.status === 200 || answer.status === 204) return answer
      throw new ProviderError(answer.status, answer.status === 429 ? answer.retryAfterMs : undefined)
    }
    const entityOf = (answer: WriteAnswer) => (answer as { readonly entity: ProviderEntity }).entity
    const base = (write: ProviderWrite) => ({ key: keyOf(write), documentID: write.documentID ?? null })
    return {
      create: async (write, options) =>
        entityOf(await send({ ...base(write), op: "create", providerID: options?.id, digest: write.payloadHash })),
      update: async (write, options) =>
        entityOf(await send({ ...base(write), op: "update", entityID: write.sourceID ?? undefined, ifMatch: options?.ifMatch, digest: write.payloadHash })),
      delete: async (write, options) => {
        await send({ ...base(write), op: "delete", entityID: write.sourceID ?? undefined, ifMatch: options?.ifMatch })
      },
      get: (id) => this.get(actor, id),
      findByKey: (key) => this.lookup(actor, keyOf(key))
    }
  }
}

/** How a request was sent, for traces. */
export const describeRequest = (r: WriteRequest): string =>
  `${r.key} ${r.op}${r.entityID === undefined ? "" : ` ${r.entityID}`}${r.providerID === undefined ? "" : ` id ${r.providerID}`}` +
  `${r.ifMatch === undefined ? "" : ` ifMatch ${r.ifMatch}`} reissue ${r.reissue ?? "none"}`

/**
 * The sanctioned reissues that applied on top of an earlier applied request
 * of their key (a provider that took a stale If-Match or a taken id): a
 * reissue is sanctioned only because that cannot happen. Judged by when
 * each request applied (`appliedAs`), so a plain request that lands late,
 * after the reissue, is not one.
 */
const reissuesOnTop = (ledger: ReadonlyArray<LedgerEntry>, startedOver: ReadonlySet<string> | undefined): ReadonlyArray<ProviderViolation> => {
  const firstApplied = new Map<string, LedgerEntry>()
  for (const entry of ledger) {
    if (!entry.applied || entry.appliedAs === undefined) continue
    const first = firstApplied.get(entry.request.key)
    if (first === undefined || entry.appliedAs < first.appliedAs!) firstApplied.set(entry.request.key, entry)
  }
  const out: Array<ProviderViolation> = []
  for (const entry of ledger) {
    if (!entry.applied || entry.request.reissue === null || entry.appliedAs === undefined) continue
    if (startedOver?.has(entry.request.key) === true) continue
    const before = firstApplied.get(entry.request.key)!
    if (before === entry) continue
    out.push({
      invariant: "no-double-apply",
      detail: `${entry.request.key} applied again by the sanctioned reissue #${entry.n} ${entry.request.op} by ${entry.actor} (${entry.request.reissue}), ` +
        `on top of #${before.n} ${before.request.op} by ${before.actor}`
    })
  }
  return out
}

/**
 * A provider whose ledger starts as `entries`: a ledger read back from a
 * durable record (each entry as `JSON.parse` gives it back) or taken from
 * another provider, so that `check()` judges it. Entities are not replayed.
 */
export const providerWithLedger = (entries: ReadonlyArray<LedgerEntry>, options: FakeProviderOptions = {}): FakeProvider =>
  FakeProvider.fromLedger(entries, options)
