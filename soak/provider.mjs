// The fake provider: an HTTP server on 127.0.0.1 in the controller process
// (never killed). Every write request is appended to a ledger file, one JSON
// line each: the idempotency key, the run's lease token, the reissue kind the
// runner used, the answer and whether the write was applied. Faults come from
// a seeded PRNG: latency, 429 with Retry-After, 5xx before or after applying,
// a timeout after the write landed, validation 4xx, auth expiry. Entities
// carry etags: a stale `ifMatch` gets 412, a taken deterministic id 409;
// neither applies anything. A delete removes its entity; a delete of one
// already gone answers 410 and applies nothing.
import { appendFileSync } from "node:fs"
import { createServer } from "node:http"
import { derive, prng } from "./random.mjs"

/** How long a "timeout after the write landed" holds its answer (runners give up after `REQUEST_TIMEOUT_MS`). */
const HELD_MS = 2_500

/** The runners' request timeout. */
export const REQUEST_TIMEOUT_MS = 1_000

/** A key whose payload the provider always refuses (422): about 1 in 30, fixed per key. */
export const isInvalidPayload = (key) => derive(7, key) % 30 === 0

const readBody = (request) =>
  new Promise((resolve, reject) => {
    let text = ""
    request.setEncoding("utf8")
    request.on("data", (chunk) => (text += chunk))
    request.on("end", () => resolve(text === "" ? {} : JSON.parse(text)))
    request.on("error", reject)
  })

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Starts the provider. `ledgerPath` receives one JSON line per write request.
 * Returns `{ url, faults, calm(), close() }`: `faults` counts each injected
 * fault, `calm()` turns faults and latency off (for the recovery pass).
 */
export const startProvider = async ({ seed, ledgerPath }) => {
  const rng = prng(derive(seed, "provider"))
  const entities = new Map() // id → { etag, version, documentID, appliedKeys: [] }
  const appliedBy = new Map() // key → { entityID, etag }
  const faults = { latency: 0, "429": 0, "5xx-not-applied": 0, "5xx-applied": 0, "timeout-applied": 0, "422": 0, "401": 0, "412": 0, "409": 0 }
  let calm = false
  let authExpiredUntil = 0
  let etagSerial = 0
  const newEtag = () => `etag-${++etagSerial}`

  const deleted = new Set()
  const apply = (body) => {
    if (body.op === "delete") {
      if (!entities.has(body.entityID)) return { status: deleted.has(body.entityID) ? 410 : 404 }
      entities.delete(body.entityID)
      deleted.add(body.entityID)
      return { status: 200, entityID: body.entityID, etag: null }
    }
    if (body.op === "update") {
      const entity = entities.get(body.entityID)
      if (entity === undefined) return { status: 404 }
      if (body.ifMatch !== undefined && body.ifMatch !== entity.etag) return { status: 412 }
      entity.etag = newEtag()
      entity.documentID = body.documentID
      entity.appliedKeys.push(body.key)
      return { status: 200, entityID: body.entityID, etag: entity.etag }
    }
    const id = body.providerID ?? `auto-${++etagSerial}`
    if (entities.has(id)) return { status: 409 }
    const entity = { etag: newEtag(), documentID: body.documentID, appliedKeys: [body.key] }
    entities.set(id, entity)
    return { status: 200, entityID: id, etag: entity.etag }
  }

  const write = async (body, respond) => {
    const now = Date.now()
    const record = (answer, extra) => {
      appendFileSync(ledgerPath, JSON.stringify({
        t: now, key: body.key, token: body.token, worker: body.worker, op: body.op, entityID: body.entityID ?? null,
        providerID: body.providerID ?? null, ifMatch: body.ifMatch ?? null, reissue: body.reissue ?? null,
        status: answer.status, applied: answer.applied === true, fault: extra ?? null,
        late: typeof body.leaseExpiresAt === "number" && now >= body.leaseExpiresAt,
        leaseLeftMs: typeof body.leaseExpiresAt === "number" ? body.leaseExpiresAt - now : null
      }) + "\n")
    }
    let delay = 0
    if (!calm) {
      delay = rng.int(15)
      if (rng.chance(0.04)) (delay = rng.between(100, 400)), faults.latency++
    }
    const answer = async (status, payload, fault, applied = false, hold = delay) => {
      record({ status, applied }, fault)
      if (fault !== undefined && fault in faults) faults[fault]++
      await sleep(hold)
      respond(status, payload)
    }
    if (isInvalidPayload(body.key)) return answer(422, { error: "invalid payload" }, "422")
    if (!calm) {
      if (now < authExpiredUntil) return answer(401, { error: "token expired" }, "401")
      if (rng.chance(0.004)) {
        authExpiredUntil = now + rng.between(300, 1_200)
        return answer(401, { error: "token expired" }, "401")
      }
      if (rng.chance(0.05)) return answer(429, { retryAfterMs: rng.between(100, 800) }, "429")
      if (rng.chance(0.03)) return answer(503, { error: "unavailable" }, "5xx-not-applied")
    }
    const result = apply(body)
    if (result.status !== 200) {
      return answer(result.status, {}, result.status === 412 ? "412" : result.status === 409 ? "409" : undefined)
    }
    appliedBy.set(body.key, { entityID: result.entityID, etag: result.etag })
    const ok = { entityID: result.entityID, etag: result.etag }
    if (!calm && rng.chance(0.03)) return answer(502, { error: "bad gateway" }, "5xx-applied", true)
    if (!calm && rng.chance(0.03)) return answer(200, ok, "timeout-applied", true, HELD_MS)
    return answer(200, ok, undefined, true)
  }

  const server = createServer(async (request, response) => {
    const respond = (status, payload) => {
      if (response.destroyed) return
      response.writeHead(status, { "content-type": "application/json" })
      response.end(JSON.stringify(payload))
    }
    try {
      const url = new URL(request.url, "http://provider")
      const body = await readBody(request)
      if (request.method === "POST" && url.pathname === "/seed") {
        if (!entities.has(body.entityID)) entities.set(body.entityID, { etag: newEtag(), documentID: body.documentID, appliedKeys: [] })
        return respond(200, { etag: entities.get(body.entityID).etag })
      }
      if (request.method === "POST" && url.pathname === "/write") return await write(body, respond)
      if (request.method === "GET" && url.pathname === "/lookup") {
        const found = appliedBy.get(url.searchParams.get("key"))
        return respond(200, found === undefined ? { applied: false } : { applied: true, ...found })
      }
      if (request.method === "GET" && url.pathname === "/entity") {
        const entity = entities.get(url.searchParams.get("id"))
        return respond(entity === undefined ? 404 : 200, entity === undefined ? {} : { etag: entity.etag, documentID: entity.documentID })
      }
      respond(404, {})
    } catch (error) {
      respond(500, { error: String(error) })
    }
  })
  server.keepAliveTimeout = 5_000
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    faults,
    calm: () => void (calm = true),
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  }
}
