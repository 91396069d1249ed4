import type { ClassifiedFailure } from "./connector.js"

const field = (value: unknown, name: string): unknown =>
  typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined

const asStatus = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 100 && value <= 599 ? value : undefined

/** The HTTP status an error carries: `status`, `statusCode` or `response.status` (or `response.statusCode`). */
export const statusOf = (error: unknown): number | undefined =>
  asStatus(field(error, "status")) ?? asStatus(field(error, "statusCode")) ??
    asStatus(field(field(error, "response"), "status")) ?? asStatus(field(field(error, "response"), "statusCode"))

/** A header of an error's response: a `Headers`-like `get`, or a plain record (any case). */
const headerOf = (error: unknown, name: string): string | undefined => {
  for (const headers of [field(field(error, "response"), "headers"), field(error, "headers")]) {
    if (typeof headers !== "object" || headers === null) continue
    const get = field(headers, "get")
    if (typeof get === "function") {
      const value: unknown = (get as (n: string) => unknown).call(headers, name)
      if (typeof value === "string") return value
      continue
    }
    for (const [key, value] of Object.entries(headers)) {
      if (key.toLowerCase() === name && (typeof value === "string" || typeof value === "number")) return String(value)
    }
  }
  return undefined
}

/** The Retry-After an error carries, in ms from `now`: `retryAfterMs`, else a `Retry-After` header (seconds or a date). */
export const retryAfterOf = (error: unknown, now: number = Date.now()): number | undefined => {
  const direct = field(error, "retryAfterMs")
  if (typeof direct === "number" && Number.isFinite(direct) && direct >= 0) return direct
  const header = headerOf(error, "retry-after")
  if (header === undefined) return undefined
  const seconds = Number(header)
  if (header.trim() !== "" && Number.isFinite(seconds) && seconds >= 0) return seconds * 1_000
  const date = Date.parse(header)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** Error codes of a request that never left this machine: nothing can have landed. */
const NEVER_LEFT = new Set(["ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH", "ENETDOWN"])

/**
 * The default `classify`: what an HTTP status proves. A 401 is `auth` (deferred until the grant is renewed), a 429 or 408
 * `retryable` with its Retry-After, another 4xx `permanent` (it proves the request was not applied), a 5xx `retryable`
 * (in doubt: it proves nothing), a request that never left (`status: "offline"`, or DNS, refused or unreachable) `offline`,
 * and anything else (a timeout, a reset, a garbled answer) `unknown`: in doubt.
 */
export const classifyFailure = (error: unknown): ClassifiedFailure => {
  const status = statusOf(error)
  if (status === undefined) {
    const code = field(error, "code")
    if (field(error, "status") === "offline" || (typeof code === "string" && NEVER_LEFT.has(code))) return { kind: "offline" }
    return { kind: "unknown" }
  }
  const retryAfterMs = retryAfterOf(error)
  const after = retryAfterMs === undefined ? {} : { retryAfterMs }
  if (status === 401) return { kind: "auth", httpStatus: status }
  if (status === 429 || status === 408) return { kind: "retryable", httpStatus: status, ...after }
  if (status >= 400 && status < 500) return { kind: "permanent", httpStatus: status }
  if (status >= 500) return { kind: "retryable", httpStatus: status, ...after }
  return { kind: "unknown", httpStatus: status }
}
