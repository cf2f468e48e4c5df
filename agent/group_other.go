//go:build !linux && !darwin

package agent

import "errors"

var errNoIdentity = errors.New("process start times are not read on this OS")

func bootIdentity() (string, error) { return "", errNoIdentity }
func procStart(int) (string, error) { return "", errNoIdentity }
