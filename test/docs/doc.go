// Package docs holds the checks on the repository's Markdown: every path a
// page names stays inside the repository, and every relative link leads to a
// file that exists, so that a fresh clone has everything its docs point at.
package docs
