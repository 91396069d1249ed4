// The fake provider: an HTTP server on 127.0.0.1 in the controller process
// (never killed), in front of the testkit's provider model (`FakeProvider`
// from @connector-store/testkit/provider: entities with etags, the apply
// rules, the ledger and its duplicate check). Every write request goes
// through the model; its ledger entry is appended to a ledger file, one JSON
// line each, with the run's lease token and how much of the lease was left.
// Faults come from a seeded PRNG and become each request's fate in the
// model: 429 with Retry-After, 503 before applying, 502 after applying, a
// timeout after the write landed, validation 422, auth expiry; latency is
// the transport's. The model refuses a stale `ifMatch` with 412 and a taken
// id with 409, and answers a delete of an entity already gone with 410;
// none of them applies anything.
import { appendFileSync } from "node:fs"
import { createServer } from "node:http"
import { FakeProvider } from "@connector-store/testkit/provider"
import { derive, prng } from "./random.mjs"

/** How long a "timeout after the write landed" holds its connection before hanging up (runners give up after `REQUEST_TIMEOUT_MS`). */
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

/** The soak's name for the fault a request met, from its ledger entry (null: none). */
const faultOf = (entry) => {
  if (entry.fate === "422") return "422"
  if (entry.status === 401) return "401"
  if (entry.fate === "429") return "429"
  if (entry.fate === "503") return "5xx-not-applied"
  if (entry.status === 412) return "412"
  if (entry.status === 409) return "409"
  if (entry.fate === "502-after-apply" && entry.applied) return "5xx-applied"
  if (entry.fate === "applied-no-answer" && entry.applied) return "timeout-applied"
  return null
}

/** The model's request for a `/write` body (a create's digest is its key: what a lookup by key finds it by). */
export const modelRequestOf = (body) => ({
  key: body.key,
  op: body.op,
  reissue: body.reissue ?? null,
  documentID: body.documentID ?? null,
  ...(body.entityID === undefined || body.entityID === null ? {} : { entityID: body.entityID }),
  ...(body.providerID === undefined || body.providerID === null ? {} : { providerID: body.providerID }),
  ...(body.ifMatch === undefined || body.ifMatch === null ? {} : { ifMatch: body.ifMatch }),
  ...(body.op === "delete" ? {} : { digest: body.key })
})

/**
 * Starts the provider. `ledgerPath` receives one JSON line per write request:
 * the model's ledger entry and `t`, `token`, `leaseLeftMs`, `pastLease` and
 * `fault`. Returns `{ url, model, faults, calm(), close() }`: `faults` counts
 * each injected fault, `calm()` turns faults and latency off (for the
 * recovery pass).
 */
export const startProvider = async ({ seed, ledgerPath }) => {
  const rng = prng(derive(seed, "provider"))
  const faults = { latency: 0, "429": 0, "5xx-not-applied": 0, "5xx-applied": 0, "timeout-applied": 0, "422": 0, "401": 0, "412": 0, "409": 0 }
  let calm = false
  let grantTimer
  const planned = new WeakMap()
  const model = new FakeProvider({
    fates: (request, n) => {
      const plan = planned.get(request)
      if (plan === undefined) return "ok"
      plan.n = n
      return plan.fate
    }
  })

  const fateOf = (key) => {
    if (isInvalidPayload(key)) return "422"
    if (calm || model.grantIsExpired) return "ok"
    if (rng.chance(0.004)) {
      grantTimer = setTimeout(() => model.renewGrant(), rng.between(300, 1_200))
      return "grant-expires"
    }
    if (rng.chance(0.05)) return "429"
    if (rng.chance(0.03)) return "503"
    if (rng.chance(0.03)) return "502-after-apply"
    if (rng.chance(0.03)) return "applied-no-answer"
    return "ok"
  }

  const write = async (body, respond, hangUp) => {
    const now = Date.now()
    let delay = 0
    if (!calm) {
      delay = rng.int(15)
      if (rng.chance(0.04)) (delay = rng.between(100, 400)), faults.latency++
    }
    const request = modelRequestOf(body)
    const plan = { fate: fateOf(body.key) }
    planned.set(request, plan)
    const answer = await model.write(String(body.worker ?? "unknown"), request)
    const entry = model.ledger[(plan.n ?? 0) - 1] ?? model.ledger.find((e) => e.request === request)
    const fault = faultOf(entry)
    if (fault !== null) faults[fault]++
    const leaseLeftMs = typeof body.leaseExpiresAt === "number" ? body.leaseExpiresAt - now : null
    appendFileSync(ledgerPath, JSON.stringify({
      ...entry, t: now, token: body.token ?? null, leaseLeftMs, pastLease: leaseLeftMs !== null && leaseLeftMs <= 0, fault
    }) + "\n")
    if (answer.status === "timeout") {
      await sleep(HELD_MS)
      return hangUp()
    }
    await sleep(delay)
    switch (answer.status) {
      case 200:
        return respond(200, { entityID: answer.entity.id, etag: answer.entity.etag })
      case 204:
        return respond(200, { entityID: request.entityID, etag: null })
      case 429:
        return respond(429, { retryAfterMs: rng.between(100, 800) })
      default:
        return respond(answer.status, {})
    }
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
        const entity = model.entities.get(body.entityID) ?? model.seed(body.entityID, "seed", body.documentID ?? null)
        return respond(200, { etag: entity.etag })
      }
      if (request.method === "POST" && url.pathname === "/write") return await write(body, respond, () => response.destroy())
      if (request.method === "GET" && url.pathname === "/lookup") {
        const key = url.searchParams.get("key")
        const last = model.appliedOf(key).at(-1)
        if (last === undefined) return respond(200, { applied: false })
        const entity = last.request.op === "delete" ? null : await model.lookup("lookup", key)
        return respond(200, { applied: true, entityID: entity?.id ?? last.request.entityID ?? null, etag: entity?.etag ?? null })
      }
      if (request.method === "GET" && url.pathname === "/entity") {
        const entity = await model.get("verifier", url.searchParams.get("id"))
        return respond(entity === null ? 404 : 200, entity === null ? {} : { etag: entity.etag, documentID: entity.documentID })
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
    model,
    faults,
    calm: () => {
      calm = true
      clearTimeout(grantTimer)
      model.renewGrant()
    },
    close: () => new Promise((resolve) => {
      clearTimeout(grantTimer)
      server.closeAllConnections()
      server.close(() => resolve())
    })
  }
}
