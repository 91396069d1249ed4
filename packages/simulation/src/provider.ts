import type { DocumentContent } from "./plan.js"
import type { SimClock } from "./clock.js"
import { digestOf, seeded } from "./random.js"

/** What goes wrong with one provider request, drawn from the seed for that operation and request number. */
export type Fault =
  | "none"
  | "server-error" // 500 before anything is applied
  | "server-error-after-apply" // 503 after the write was applied
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

/** A provider write as the connector sends it. */
export interface WriteRequest {
  readonly opIndex: number
  readonly kind: "create" | "update" | "delete"
  readonly entityID: string
  readonly content: DocumentContent
  /** A conditional update: applied only while the entity's etag is this one (else 412). */
  readonly ifMatch?: string | undefined
  /** True when the store handed this re-send out as a safe reissue (`claim.reissue`). */
  readonly sanctionedReissue: boolean
}

/** A provider entity as the provider returns it. */
export interface Entity {
  readonly id: string
  readonly etag: string
  readonly content: DocumentContent
}

/** What the connector sees of a request: an HTTP answer, no answer at all, or no network. */
export type ProviderAnswer =
  | { readonly status: 200 | 201; readonly entity: Entity }
  | { readonly status: 204 }
  | { readonly status: 400 | 401 | 404 | 409 | 410 | 412 | 500 | 503 }
  | { readonly status: 429; readonly retryAfterMs: number }
  | { readonly status: "timeout" }
  | { readonly status: "offline" }

/** One request that reached the provider, and whether it changed anything. */
export interface LedgerEntry {
  readonly opIndex: number
  /** The request's number among those of its operation that reached the provider's write path. */
  readonly n: number
  readonly kind: "create" | "update" | "delete"
  readonly conditional: boolean
  readonly sanctionedReissue: boolean
  readonly fault: Fault
  readonly status: ProviderAnswer["status"]
  readonly applied: boolean
  readonly at: number
}

/** How long a request that times out keeps the client waiting: well inside a runner's lease. */
export const TIMEOUT_MS = 60


/**
 * A fake calendar provider: entities with etags, a ledger of every write
 * request and whether it applied, and faults drawn from the seed per
 * (operation, request number). A conditional update with a stale `ifMatch`
 * is refused with 412, a create of an existing id with 409; an update of a
 * missing entity is 404. A delete removes the entity (204); a delete of an
 * entity that is gone answers 410 when the provider remembers deleting it,
 * else 404, and changes nothing. Lossy entities store a normalized title, so
 * their state never projects back to what the connector wrote.
 */
export class FakeProvider {
  readonly ledger: Array<LedgerEntry> = []
  readonly deleted = new Set<string>()
  private readonly entities = new Map<string, Entity>()
  private readonly requests = new Map<number, number>()
  private readonly lossy = new Set<string>()
  private revision = 0

  constructor(
    readonly seed: string | number,
    private readonly faults: (opIndex: number, n: number) => FaultPlan = (opIndex, n) => planFault(seed, opIndex, n)
  ) {}

  /** Declares an entity id lossy: what the provider stores of it is normalized. */
  markLossy(id: string): void {
    this.lossy.add(id)
  }

  /** Puts an entity in place before the run (no ledger entry). */
  seedEntity(id: string, content: DocumentContent): Entity {
    return this.store(id, content)
  }

  private store(id: string, content: DocumentContent): Entity {
    const kept = this.lossy.has(id) ? { ...content, title: content.title.slice(0, 10) } : content
    const entity = { id, etag: `"${id}:${++this.revision}"`, content: kept }
    this.entities.set(id, entity)
    return entity
  }

  /** Handles a write whose grant was accepted; `now` stamps the ledger. */
  async write(request: WriteRequest, clock: SimClock): Promise<ProviderAnswer> {
    const n = (this.requests.get(request.opIndex) ?? 0) + 1
    this.requests.set(request.opIndex, n)
    const plan = this.faults(request.opIndex, n)
    let applied = false
    const answer = async (status: ProviderAnswer["status"], value: ProviderAnswer): Promise<ProviderAnswer> => {
      this.ledger.push({
        opIndex: request.opIndex,
        n,
        kind: request.kind,
        conditional: request.ifMatch !== undefined,
        sanctionedReissue: request.sanctionedReissue,
        fault: plan.fault,
        status,
        applied,
        at: clock.now()
      })
      if (status === "timeout") await clock.sleep(TIMEOUT_MS)
      return value
    }
    await clock.sleep(plan.latencyMs)
    switch (plan.fault) {
      case "server-error":
        return answer(500, { status: 500 })
      case "rate-limited":
        return answer(429, { status: 429, retryAfterMs: plan.retryAfterMs })
      case "timeout":
        return answer("timeout", { status: "timeout" })
      case "rejected":
        return answer(400, { status: 400 })
      default:
        break
    }
    const current = this.entities.get(request.entityID)
    if (request.kind === "delete") {
      if (current === undefined) {
        return this.deleted.has(request.entityID) ? answer(410, { status: 410 }) : answer(404, { status: 404 })
      }
      this.entities.delete(request.entityID)
      this.deleted.add(request.entityID)
      applied = true
      if (plan.fault === "server-error-after-apply") return answer(503, { status: 503 })
      if (plan.fault === "timeout-after-apply") return answer("timeout", { status: "timeout" })
      return answer(204, { status: 204 })
    }
    if (request.kind === "create" && current !== undefined) return answer(409, { status: 409 })
    if (request.kind === "update" && current === undefined) return answer(404, { status: 404 })
    if (request.ifMatch !== undefined && current !== undefined && current.etag !== request.ifMatch) {
      return answer(412, { status: 412 })
    }
    const entity = this.store(request.entityID, request.content)
    applied = true
    if (plan.fault === "server-error-after-apply") return answer(503, { status: 503 })
    if (plan.fault === "timeout-after-apply") return answer("timeout", { status: "timeout" })
    return answer(request.kind === "create" ? 201 : 200, { status: request.kind === "create" ? 201 : 200, entity })
  }

  /** The ids of the entities the provider holds now. */
  entityIDs(): ReadonlyArray<string> {
    return [...this.entities.keys()]
  }

  /** The entity as a GET returns it, or `undefined` (404). */
  read(id: string): Entity | undefined {
    return this.entities.get(id)
  }

  /** Someone edits the entity in the provider's own UI: new content, new etag. */
  editElsewhere(id: string, title: string): Entity | undefined {
    const current = this.entities.get(id)
    return current === undefined ? undefined : this.store(id, { ...current.content, title, by: "provider" })
  }

  /** Someone deletes the entity at the provider. */
  deleteElsewhere(id: string): boolean {
    this.deleted.add(id)
    return this.entities.delete(id)
  }

  /** One page of a full listing, in id order: the entities after `cursor`, and where the next page starts. */
  list(cursor: string | null, limit: number): { readonly items: ReadonlyArray<Entity>; readonly next: string | null } {
    const ids = [...this.entities.keys()].sort().filter((id) => cursor === null || id > cursor)
    const items = ids.slice(0, limit).map((id) => this.entities.get(id)!)
    return { items, next: ids.length > limit ? items.at(-1)!.id : null }
  }

  /**
   * The provider's behaviour as a fingerprint: per operation, the faults and
   * statuses of its requests in order. The same seed gives the same
   * fingerprint for the same requests.
   */
  fingerprint(): string {
    const byOp = new Map<number, Array<string>>()
    for (const entry of this.ledger) {
      const list = byOp.get(entry.opIndex) ?? []
      list.push(`${entry.n}:${entry.fault}:${entry.status}:${entry.applied ? "applied" : "-"}`)
      byOp.set(entry.opIndex, list)
    }
    return digestOf([...byOp.entries()].sort(([a], [b]) => a - b))
  }
}
