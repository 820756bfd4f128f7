// Package platform is being built.
package platform
