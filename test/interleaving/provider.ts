import type { Interleaving } from "./scheduler.js"

/**
 * What happens to one write request on its way, chosen per request by the
 * schedule: applied and answered; refused before applying (503, 429, 422,
 * 401); applied and then answered 502; applied and never answered; or lost
 * on the way (never arrives). A refusal the entity's own state calls for
 * (404, 409 taken id, 412 stale If-Match) wins over any fate that applies.
 */
export type RequestFate = "ok" | "503" | "429" | "422" | "401" | "502-after-apply" | "applied-no-answer" | "lost"

/** Every fate, for arbitraries. */
export const REQUEST_FATES: ReadonlyArray<RequestFate> = [
  "ok",
  "503",
  "429",
  "422",
  "401",
  "502-after-apply",
  "applied-no-answer",
  "lost"
]

/** A write request as a runner sends it. */
export interface WriteRequest {
  /** The operation's idempotency key, `callerDID/operationID`. */
  readonly key: string
  readonly token: string
  readonly op: "create" | "update"
  /** The entity an update targets. */
  readonly entityID?: string | undefined
  /** A create's own id (deterministic create); absent, the provider picks one. */
  readonly providerID?: string | undefined
  readonly ifMatch?: string | undefined
  /** The reissue the store's claim handed out, or null for a plain first send. */
  readonly reissue: "conditional-update" | "deterministic-create" | null
  /** The local document the write comes from, and the state it sends. */
  readonly documentID: string
  readonly digest: string
}

/** A provider entity. */
export interface Entity {
  readonly id: string
  readonly etag: string
  readonly digest: string
  /** The local document whose write-back last wrote it. */
  readonly documentID: string
}

/** What a runner sees of its request. */
export type WriteAnswer =
  | { readonly status: 200; readonly entity: Entity }
  | { readonly status: 401 | 404 | 409 | 412 | 422 | 429 | 502 | 503 }
  | { readonly status: "timeout" }

/** One request in the provider's append-only ledger. */
export interface LedgerEntry {
  readonly n: number
  readonly request: WriteRequest
  readonly fate: RequestFate
  /** The actor that sent it. */
  readonly actor: string
  /** `in-flight` until it arrives; `lost` when it never will. */
  arrival: "in-flight" | "arrived" | "lost"
  applied: boolean
  status: WriteAnswer["status"] | null
  /** True when it arrived after its sender had given up waiting (timed out or crashed). */
  late: boolean
}

/**
 * A fake provider for the interleaving suite: entities with etags, an
 * append-only ledger of every write request (whether it arrived, applied,
 * and arrived late), lookups by idempotency key, and a paged listing.
 * Every request's arrival and every answer is a scheduling point of the
 * `Interleaving`, so a request can land after its runner gave up or died.
 * The etag and id rules follow the soak's provider: a stale `ifMatch` is
 * 412 and a taken id 409, neither applying anything.
 */
export class FakeProvider {
  readonly ledger: Array<LedgerEntry> = []
  readonly entities = new Map<string, Entity>()
  private serial = 0
  private fateIndex = 0

  constructor(
    private readonly il: Interleaving,
    /** The fates of the requests in the order they leave; past its end, `ok`. */
    private readonly fates: ReadonlyArray<RequestFate>
  ) {}

  /** Puts an entity in place without a request (the world before the schedule). */
  seed(id: string, digest: string, documentID: string): Entity {
    const entity = { id, etag: `etag-${++this.serial}`, digest, documentID }
    this.entities.set(id, entity)
    return entity
  }

  private nextFate(): RequestFate {
    if (this.il.calm) return "ok"
    return this.fates[this.fateIndex++] ?? "ok"
  }

  private apply(entry: LedgerEntry): WriteAnswer {
    const { request } = entry
    const refusedBy = (status: 401 | 422 | 429 | 503): WriteAnswer => ({ status })
    switch (entry.fate) {
      case "503":
        return refusedBy(503)
      case "429":
        return refusedBy(429)
      case "422":
        return refusedBy(422)
      case "401":
        return refusedBy(401)
      default:
        break
    }
    let id: string
    if (request.op === "update") {
      const current = this.entities.get(request.entityID!)
      if (current === undefined) return { status: 404 }
      if (request.ifMatch !== undefined && request.ifMatch !== current.etag) return { status: 412 }
      id = current.id
    } else {
      id = request.providerID ?? `auto-${this.serial + 1}`
      if (this.entities.has(id)) return { status: 409 }
    }
    const entity = { id, etag: `etag-${++this.serial}`, digest: request.digest, documentID: request.documentID }
    this.entities.set(id, entity)
    entry.applied = true
    if (entry.fate === "502-after-apply") return { status: 502 }
    return { status: 200, entity }
  }

  /**
   * Sends `request` for `actor`: a crash point before it leaves, then its
   * arrival (a scheduling point of its own, which may come after the sender
   * stopped waiting), then the answer or the sender's timeout, whichever
   * the schedule releases first, then a crash point (the answer lost).
   */
  async write(actor: string, request: WriteRequest): Promise<WriteAnswer> {
    await this.il.point(actor, `send ${request.key} ${describeRequest(request)}`)
    const entry: LedgerEntry = {
      n: this.ledger.length + 1,
      request,
      fate: this.nextFate(),
      actor,
      arrival: "in-flight",
      applied: false,
      status: null,
      late: false
    }
    this.ledger.push(entry)
    let waiting = true
    const answered = entry.fate === "lost"
      ? new Promise<never>(() => {})
      : this.il.provider(`request #${entry.n} (${request.key}, ${entry.fate}) arrives`).then(() => {
        const answer = this.apply(entry)
        entry.arrival = "arrived"
        entry.status = answer.status
        entry.late = !waiting
        this.il.note(`provider: #${entry.n} ${request.key} → ${answer.status}${entry.applied ? " applied" : ""}${entry.late ? " LATE" : ""}`)
        if (entry.fate === "applied-no-answer" && entry.applied) return new Promise<never>(() => {})
        return this.il.provider(`answer of #${entry.n} travels back`).then(() => answer)
      })
    if (entry.fate === "lost") entry.arrival = "lost"
    const timeout = this.il.calm
      ? new Promise<never>(() => {})
      : this.il.provider(`${actor} stops waiting for #${entry.n}`).then((): WriteAnswer => ({ status: "timeout" }))
    const answer = await Promise.race([answered, timeout])
    waiting = false
    this.il.record(actor, `answer of #${entry.n}`, String(answer.status))
    await this.il.point(actor, `got answer of #${entry.n}`)
    return answer
  }

  /** A GET of the entity (a scheduling and crash point; read when the schedule releases it). */
  async get(actor: string, id: string): Promise<Entity | null> {
    await this.il.point(actor, `GET ${id}`)
    const entity = this.entities.get(id) ?? null
    this.il.record(actor, `GET ${id}`, entity === null ? "404" : entity.digest)
    await this.il.point(actor, `got ${id}`)
    return entity
  }

  /** What the provider applied for a key (the newest applied request), as a lookup by idempotency key finds it. */
  async lookup(actor: string, key: string): Promise<Entity | null> {
    await this.il.point(actor, `lookup ${key}`)
    const applied = this.ledger.filter((e) => e.request.key === key && e.applied).at(-1)
    const found = applied === undefined ? null : this.entityWritten(applied)
    this.il.record(actor, `lookup ${key}`, found === null ? "not applied" : found.id)
    await this.il.point(actor, `looked up ${key}`)
    return found
  }

  private entityWritten(entry: LedgerEntry): Entity | null {
    const { request } = entry
    if (request.op === "update") return this.entities.get(request.entityID!) ?? null
    const id = request.providerID ?? [...this.entities.values()].find((e) => e.digest === request.digest)?.id
    return id === undefined ? null : this.entities.get(id) ?? null
  }

  /** One page of the full listing in id order after `cursor` (read when the schedule releases it). */
  async list(actor: string, cursor: string | null, limit: number): Promise<{ items: ReadonlyArray<Entity>; next: string | null }> {
    await this.il.point(actor, `list after ${cursor ?? "start"}`)
    const ids = [...this.entities.keys()].sort().filter((id) => cursor === null || id > cursor)
    const items = ids.slice(0, limit).map((id) => this.entities.get(id)!)
    const page = { items, next: ids.length > limit ? items.at(-1)!.id : null }
    this.il.record(actor, `list after ${cursor ?? "start"}`, items.map((e) => e.id).join(",") + (page.next === null ? " (end)" : ""))
    await this.il.point(actor, `listed after ${cursor ?? "start"}`)
    return page
  }

  /** Someone edits the entity in the provider's own UI. */
  editElsewhere(id: string, digest: string): Entity | null {
    const current = this.entities.get(id)
    if (current === undefined) return null
    const entity = { ...current, etag: `etag-${++this.serial}`, digest }
    this.entities.set(id, entity)
    return entity
  }

  /** Someone deletes the entity at the provider. */
  deleteElsewhere(id: string): boolean {
    return this.entities.delete(id)
  }

  /** True while some request of `key` applied or may still arrive. */
  possiblyLanded(key: string): boolean {
    return this.ledger.some((e) => e.request.key === key && (e.applied || e.arrival === "in-flight"))
  }

  /** True while some request of `key` may still arrive. */
  inFlight(key: string): boolean {
    return this.ledger.some((e) => e.request.key === key && e.arrival === "in-flight")
  }

  /** The documents some entity at the provider was last written from. */
  liveDocuments(): ReadonlySet<string> {
    return new Set([...this.entities.values()].map((e) => e.documentID))
  }
}

/** How a request was sent, for traces. */
export const describeRequest = (r: WriteRequest): string =>
  `${r.op}${r.entityID === undefined ? "" : ` ${r.entityID}`}${r.providerID === undefined ? "" : ` id ${r.providerID}`}` +
  `${r.ifMatch === undefined ? "" : ` ifMatch ${r.ifMatch}`} reissue ${r.reissue ?? "none"}`
