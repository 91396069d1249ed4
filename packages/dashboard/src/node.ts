import type { IncomingMessage, ServerResponse } from "node:http"
import type { DashboardHandler } from "./options.js"

const MAX_BODY_BYTES = 1024 * 1024

/**
 * The handler as a Node `http` request listener: `http.createServer(nodeListener(handler))`, or a route of an Express or
 * Connect app. A body over 1 MiB is refused without being read further.
 */
export const nodeListener = (handler: DashboardHandler) => (req: IncomingMessage, res: ServerResponse): void => {
  void (async () => {
    const chunks: Array<Buffer> = []
    let size = 0
    for await (const chunk of req) {
      size += (chunk as Buffer).length
      if (size > MAX_BODY_BYTES) {
        res.writeHead(413, { "content-type": "text/plain; charset=utf-8" }).end("refused: the request is too large\n")
        return
      }
      chunks.push(chunk as Buffer)
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(req.headers)) {
      if (Array.isArray(value)) for (const item of value) headers.append(name, item)
      else if (value !== undefined) headers.set(name, value)
    }
    const method = req.method ?? "GET"
    const request = new Request(`http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`, {
      method,
      headers,
      ...(method === "GET" || method === "HEAD" ? {} : { body: Buffer.concat(chunks) })
    })
    const response = await handler(request)
    const out: Record<string, string | Array<string>> = {}
    response.headers.forEach((value, name) => {
      if (name !== "set-cookie") out[name] = value
    })
    const cookies = response.headers.getSetCookie()
    if (cookies.length > 0) out["set-cookie"] = cookies
    res.writeHead(response.status, out)
    res.end(method === "HEAD" ? undefined : Buffer.from(await response.arrayBuffer()))
  })().catch((error: unknown) => {
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain; charset=utf-8" })
    res.end(`the dashboard failed: ${error instanceof Error ? error.message : String(error)}\n`)
  })
}
