/**
 * connector-store's operator dashboard: a fetch-style handler (`dashboardHandler`) with server-rendered pages of what is
 * stuck, in doubt or paused, and the actions to act on it through the store's own guarded calls; `nodeListener` mounts it on
 * Node's `http`. Read-only unless `actions` is on; `authorize` decides, on the server, who may look and who may act.
 *
 * @module @connector-store/dashboard
 */
export { ACTIONS, type DashboardAction, type RowAnswer } from "./actions.js"
export { dashboardHandler } from "./handler.js"
export { escapeHtml } from "./html.js"
export { nodeListener } from "./node.js"
export type { DashboardAccess, DashboardHandler, DashboardOptions, DashboardStore } from "./options.js"
