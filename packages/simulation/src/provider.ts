import {
  FakeProvider,
  type LedgerEntry as ModelEntry,
  type ProviderEntity,
  type ProviderViolation,
  providerWithLedger,
  type RequestFate,
  type WriteAnswer,
  type WriteRequest as ModelRequest
} from "@connector-store/testkit/provider"
import type { DocumentContent } from "./plan.js"
import type { SimClock } from "./clock.js"
import { digestOf, seeded } from "./random.js"

/** What goes wrong with one provider request, drawn from the seed for that operation and request number. */
export type Fault =
  | "none"
  | "server-error" // 500 before anything is applied
  | "server-error-after-apply" // 502 after the write was applied
  | "rate-limited" // 429 with Retry-After
  | "timeout" // no answer; nothing applied
  | "timeout-after-apply" // no answer; the write was applied
  | "rejected" // 400: the provider will never take this operation's payload (every request of it)

/** One planned answer: the fault and the latency before it. */
export interface FaultPlan {
  readonly fault: Fault
  readonly latencyMs: number
  readonly retryAfterMs: number
}

/**
 * The fault of request `n` (1-based) of operation `opIndex`: a pure function
 * of the seed. About one operation in thirty carries a payload the provider
 * rejects (400) on every request; the others meet transient faults per request.
 */
export const planFault = (seed: string | number, opIndex: number, n: number): FaultPlan => {
  const draw = seeded(seed, "provider", opIndex, n)
  const latencyMs = draw.int(1, 12)
  const retryAfterMs = draw.int(20, 80)
  if (seeded(seed, "payload", opIndex).chance(0.03)) return { fault: "rejected", latencyMs, retryAfterMs }
  const r = draw.next()
  const fault: Fault = r < 0.58 ? "none"
    : r < 0.68 ? "server-error"
    : r < 0.76 ? "server-error-after-apply"
    : r < 0.85 ? "rate-limited"
    : r < 0.90 ? "timeout"
    : "timeout-after-apply"
  return { fault, latencyMs, retryAfterMs }
}

/** The fate of the testkit's provider model each fault is. */
const FATE_OF: Readonly<Record<Fault, RequestFate>> = {
  none: "ok",
  "server-error": "500",
  "server-error-after-apply": "502-after-apply",
  "rate-limited": "429",
  timeout: "lost",
  "timeout-after-apply": "applied-no-answer",
  rejected: "400"
}

/** A provider write as the connector sends it. */
export interface WriteRequest {
  readonly opIndex: number
  /** The operation's idempotency key, `callerDID/operationID`. */
  readonly key: string
  readonly kind: "create" | "update" | "delete"
  /** The entity an update or a delete targets; a create's deterministic id. */
  readonly entityID: string
  /** The local document the write comes from. */
  readonly documentID?: string | undefined
  readonly content: DocumentContent
  /** A conditional update: applied only while the entity's etag is this one (else 412). */
  readonly ifMatch?: string | undefined
  /** The reissue the store handed out (`claim.reissue`) that this re-send is exactly; null for a plain send. */
  readonly reissue: ModelRequest["reissue"]
}

/** A provider entity as the provider returns it. */
export interface Entity {
  readonly id: string
  readonly etag: string
  readonly content: DocumentContent
}

/** What the connector sees of a request: an HTTP answer, no answer at all, or no network. */
export type ProviderAnswer =
  | { readonly status: 200; readonly entity: Entity }
  | Exclude<WriteAnswer, { readonly status: 200 }>

/**
 * One request that reached the provider's write path: the entry of the
 * provider model's ledger, as it stood once the connector had its answer,
 * with the operation it belongs to, its number among that operation's
 * requests, the fault the seed planned for it, what the connector saw and
 * when.
 */
export interface LedgerEntry extends ModelEntry {
  readonly opIndex: number
  /** Its number among the requests of its operation that reached the write path, from 1. */
  readonly attempt: number
  readonly fault: Fault
  /** What the connector saw (`timeout` when the answer never came). */
  readonly answer: ProviderAnswer["status"]
  readonly at: number
}

/** How long a request that times out keeps the client waiting: well inside a runner's lease. */
export const TIMEOUT_MS = 60

/**
 * Every write applied twice outside a sanctioned reissue, judged by the
 * testkit's provider model (`FakeProvider.check`) over `ledger`.
 */
export const doubleApplies = (ledger: ReadonlyArray<ModelEntry>): ReadonlyArray<ProviderViolation> =>
  providerWithLedger(ledger).check()

/**
 * The simulation's calendar provider: the testkit's provider model
 * (`FakeProvider`: entities with etags, tombstones, the apply rules, the
 * ledger and its duplicate check) behind the seed's faults and latency,
 * with the content of every event. A fault is drawn per (operation, request
 * number) and becomes the request's fate in the model; a request waits its
 * latency before it arrives, and one that gets no answer keeps its sender
 * waiting `TIMEOUT_MS`. Lossy entities store a normalized title, so their
 * state never projects back to what the connector wrote.
 */
export class CalendarProvider {
  /** The provider model every request goes through. */
  readonly model: FakeProvider
  /** Every request that reached the write path, in the order they were answered. */
  readonly ledger: Array<LedgerEntry> = []
  private readonly contents = new Map<string, DocumentContent>()
  private readonly planned = new WeakMap<ModelRequest, { readonly fault: Fault; n?: number }>()
  private readonly requests = new Map<number, number>()
  private readonly lossy = new Set<string>()

  constructor(
    readonly seed: string | number,
    private readonly faults: (opIndex: number, n: number) => FaultPlan = (opIndex, n) => planFault(seed, opIndex, n)
  ) {
    this.model = new FakeProvider({
      fates: (request, n) => {
        const planned = this.planned.get(request)
        if (planned === undefined) return "ok"
        planned.n = n
        return FATE_OF[planned.fault]
      }
    })
  }

  /** Declares an entity id lossy: what the provider stores of it is normalized. */
  markLossy(id: string): void {
    this.lossy.add(id)
  }

  /** The digest the model keeps for `content` written to `id` (normalized when `id` is lossy). */
  private kept(id: string, content: DocumentContent): string {
    const stored = this.lossy.has(id) ? { ...content, title: content.title.slice(0, 10) } : content
    const digest = digestOf(stored)
    this.contents.set(digest, stored)
    return digest
  }

  private entityOf(entity: ProviderEntity): Entity {
    return { id: entity.id, etag: entity.etag, content: this.contents.get(entity.digest)! }
  }

  /** Puts an entity in place before the run (no ledger entry). */
  seedEntity(id: string, content: DocumentContent, documentID: string | null = null): Entity {
    return this.entityOf(this.model.seed(id, this.kept(id, content), documentID))
  }

  /** Handles a write whose grant was accepted; `clock` times its latency and stamps the ledger. */
  async write(request: WriteRequest, clock: SimClock): Promise<ProviderAnswer> {
    const attempt = (this.requests.get(request.opIndex) ?? 0) + 1
    this.requests.set(request.opIndex, attempt)
    const plan = this.faults(request.opIndex, attempt)
    await clock.sleep(plan.latencyMs)
    const sent: ModelRequest = {
      key: request.key,
      op: request.kind,
      reissue: request.reissue,
      documentID: request.documentID ?? null,
      ...(request.kind === "create" ? { providerID: request.entityID } : { entityID: request.entityID }),
      ...(request.ifMatch === undefined ? {} : { ifMatch: request.ifMatch }),
      ...(request.kind === "delete" ? {} : { digest: this.kept(request.entityID, request.content) })
    }
    const planned: { readonly fault: Fault; n?: number } = { fault: plan.fault }
    this.planned.set(sent, planned)
    const got = await this.model.write("connector", sent)
    const answer: ProviderAnswer = got.status === 200
      ? { status: 200, entity: this.entityOf(got.entity) }
      : got.status === 429
      ? { status: 429, retryAfterMs: plan.retryAfterMs }
      : got
    const entry = this.model.ledger[(planned.n ?? 0) - 1] ?? this.model.ledger.find((e) => e.request === sent)!
    this.ledger.push({ ...entry, opIndex: request.opIndex, attempt, fault: plan.fault, answer: answer.status, at: clock.now() })
    if (answer.status === "timeout") await clock.sleep(TIMEOUT_MS)
    return answer
  }

  /** Every write applied twice outside a sanctioned reissue (the model's `check()`). */
  check(): ReadonlyArray<ProviderViolation> {
    return this.model.check()
  }

  /** The ids of the entities the provider holds now. */
  entityIDs(): ReadonlyArray<string> {
    return [...this.model.entities.keys()]
  }

  /** The entity as a GET returns it, or `undefined` (404, or 410 once deleted). */
  read(id: string): Entity | undefined {
    const entity = this.model.entities.get(id)
    return entity === undefined ? undefined : this.entityOf(entity)
  }

  /** Someone edits the entity in the provider's own UI: new content, new etag. */
  editElsewhere(id: string, title: string): Entity | undefined {
    const current = this.read(id)
    if (current === undefined) return undefined
    const entity = this.model.editElsewhere(id, this.kept(id, { ...current.content, title, by: "provider" }))
    return entity === null ? undefined : this.entityOf(entity)
  }

  /** Someone deletes the entity at the provider. */
  deleteElsewhere(id: string): boolean {
    return this.model.deleteElsewhere(id)
  }

  /** One page of a full listing, in id order: the entities after `cursor`, and where the next page starts. */
  async list(cursor: string | null, limit: number): Promise<{ readonly items: ReadonlyArray<Entity>; readonly next: string | null }> {
    const page = await this.model.list("connector", cursor, limit)
    return { items: page.items.map((e) => this.entityOf(e)), next: page.next }
  }

  /**
   * The provider's behaviour as a fingerprint: per operation, the faults and
   * answers of its requests in order. The same seed gives the same
   * fingerprint for the same requests.
   */
  fingerprint(): string {
    const byOp = new Map<number, Array<string>>()
    for (const entry of this.ledger) {
      const list = byOp.get(entry.opIndex) ?? []
      list.push(`${entry.attempt}:${entry.fault}:${entry.answer}:${entry.applied ? "applied" : "-"}`)
      byOp.set(entry.opIndex, list)
    }
    return digestOf([...byOp.entries()].sort(([a], [b]) => a - b))
  }
}
