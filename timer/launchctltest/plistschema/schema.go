// Package plistschema checks a launchd job plist against the keys and value types that
// launchd.plist(5) documents, so that tests on machines without launchd can refuse what launchd
// would refuse (a value of the wrong type) and notice what it would ignore (a key it does not
// know). The table follows the man page as published with launchd's source
// (freebsd/openlaunchd, man/launchd.plist.5) and the keys macOS added since
// (AssociatedBundleIdentifiers, LaunchEvents, ...). It is for tests only and never talks to
// launchd.
package plistschema

import (
	"fmt"
	"sort"
	"strings"

	"howett.net/plist"
)

// kind is a value type of launchd.plist(5).
type kind int

const (
	str           kind = iota // <string>
	boolean                   // <boolean>
	integer                   // <integer>
	strArray                  // <array of strings>
	strDict                   // <dictionary of strings>
	intDict                   // <dictionary of integers>
	anyDict                   // a <dictionary> whose inside this package does not check
	calendar                  // <dictionary of integers or array of dictionary of integers>
	boolOrDict                // KeepAlive: <boolean or dictionary of stuff>
	strOrStrArray             // LimitLoadToSessionType, AssociatedBundleIdentifiers
	intOrStr                  // Umask (an integer; macOS also takes a string of octal digits)
)

// Keys are the top-level keys of launchd.plist(5) and their types.
var Keys = map[string]kind{
	"Label":                       str,
	"Disabled":                    boolean,
	"UserName":                    str,
	"GroupName":                   str,
	"inetdCompatibility":          anyDict,
	"LimitLoadToHosts":            strArray,
	"LimitLoadFromHosts":          strArray,
	"LimitLoadToSessionType":      strOrStrArray,
	"LimitLoadToHardware":         anyDict,
	"LimitLoadFromHardware":       anyDict,
	"Program":                     str,
	"ProgramArguments":            strArray,
	"EnableGlobbing":              boolean,
	"EnableTransactions":          boolean,
	"EnablePressuredExit":         boolean,
	"OnDemand":                    boolean,
	"KeepAlive":                   boolOrDict,
	"RunAtLoad":                   boolean,
	"RootDirectory":               str,
	"WorkingDirectory":            str,
	"EnvironmentVariables":        strDict,
	"Umask":                       intOrStr,
	"TimeOut":                     integer,
	"ExitTimeOut":                 integer,
	"ThrottleInterval":            integer,
	"InitGroups":                  boolean,
	"WatchPaths":                  strArray,
	"QueueDirectories":            strArray,
	"StartOnMount":                boolean,
	"StartInterval":               integer,
	"StartCalendarInterval":       calendar,
	"StandardInPath":              str,
	"StandardOutPath":             str,
	"StandardErrorPath":           str,
	"Debug":                       boolean,
	"WaitForDebugger":             boolean,
	"SoftResourceLimits":          intDict,
	"HardResourceLimits":          intDict,
	"Nice":                        integer,
	"ProcessType":                 str,
	"LegacyTimers":                boolean,
	"AbandonProcessGroup":         boolean,
	"LowPriorityIO":               boolean,
	"LowPriorityBackgroundIO":     boolean,
	"MaterializeDatalessFiles":    boolean,
	"LaunchOnlyOnce":              boolean,
	"MachServices":                anyDict,
	"Sockets":                     anyDict,
	"LaunchEvents":                anyDict,
	"SessionCreate":               boolean,
	"AssociatedBundleIdentifiers": strOrStrArray,
}

// calendarKeys are the fields of a StartCalendarInterval dictionary and their ranges.
var calendarKeys = map[string][2]int{
	"Minute":  {0, 59},
	"Hour":    {0, 23},
	"Day":     {1, 31},
	"Weekday": {0, 7}, // 0 and 7 are Sunday
	"Month":   {1, 12},
}

// processTypes are the values ProcessType may have.
var processTypes = []string{"Background", "Standard", "Adaptive", "Interactive"}

// Check decodes a plist and checks every key launchd knows against its type, and the
// requirements of the man page (a Label; a Program or ProgramArguments; calendar fields in
// range; a positive StartInterval; a known ProcessType). unknown lists the keys launchd.plist(5)
// does not have (launchd ignores them); err is the first problem launchd would refuse.
func Check(data []byte) (unknown []string, err error) {
	var m map[string]any
	if _, err := plist.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a property list: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("the plist is not a dictionary")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		want, ok := Keys[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		if err := checkValue(k, want, m[k]); err != nil {
			return unknown, err
		}
	}
	if l, _ := m["Label"].(string); l == "" {
		return unknown, fmt.Errorf("the Label key is missing or empty (launchd.plist(5): required)")
	}
	prog, _ := m["Program"].(string)
	args, _ := m["ProgramArguments"].([]any)
	if prog == "" && len(args) == 0 {
		return unknown, fmt.Errorf("neither Program nor ProgramArguments (launchd.plist(5): one is required)")
	}
	if v, ok := m["StartInterval"]; ok {
		if n, _ := asInt(v); n <= 0 {
			return unknown, fmt.Errorf("StartInterval %v is not a positive number of seconds", v)
		}
	}
	if v, ok := m["ProcessType"].(string); ok && !contains(processTypes, v) {
		return unknown, fmt.Errorf("ProcessType %q is not one of %s", v, strings.Join(processTypes, ", "))
	}
	return unknown, nil
}

func checkValue(key string, want kind, v any) error {
	bad := func(what string) error { return fmt.Errorf("%s is a %T, launchd.plist(5) wants %s", key, v, what) }
	switch want {
	case str:
		if _, ok := v.(string); !ok {
			return bad("a string")
		}
	case boolean:
		if _, ok := v.(bool); !ok {
			return bad("a boolean")
		}
	case integer:
		if _, ok := asInt(v); !ok {
			return bad("an integer")
		}
	case strArray:
		a, ok := v.([]any)
		if !ok {
			return bad("an array of strings")
		}
		for i, e := range a {
			if _, ok := e.(string); !ok {
				return fmt.Errorf("%s[%d] is a %T, launchd.plist(5) wants a string", key, i, e)
			}
		}
	case strDict, intDict, anyDict:
		d, ok := v.(map[string]any)
		if !ok {
			return bad("a dictionary")
		}
		for k, e := range d {
			switch {
			case want == strDict:
				if _, ok := e.(string); !ok {
					return fmt.Errorf("%s.%s is a %T, launchd.plist(5) wants a string", key, k, e)
				}
			case want == intDict:
				if _, ok := asInt(e); !ok {
					return fmt.Errorf("%s.%s is a %T, launchd.plist(5) wants an integer", key, k, e)
				}
			}
		}
	case calendar:
		switch c := v.(type) {
		case map[string]any:
			return checkCalendar(key, c)
		case []any:
			if len(c) == 0 {
				return fmt.Errorf("%s is an empty array", key)
			}
			for i, e := range c {
				d, ok := e.(map[string]any)
				if !ok {
					return fmt.Errorf("%s[%d] is a %T, launchd.plist(5) wants a dictionary of integers", key, i, e)
				}
				if err := checkCalendar(fmt.Sprintf("%s[%d]", key, i), d); err != nil {
					return err
				}
			}
		default:
			return bad("a dictionary of integers or an array of them")
		}
	case boolOrDict:
		switch v.(type) {
		case bool, map[string]any:
		default:
			return bad("a boolean or a dictionary")
		}
	case strOrStrArray:
		if _, ok := v.(string); ok {
			return nil
		}
		return checkValue(key, strArray, v)
	case intOrStr:
		if _, ok := v.(string); ok {
			return nil
		}
		return checkValue(key, integer, v)
	}
	return nil
}

func checkCalendar(key string, d map[string]any) error {
	if len(d) == 0 {
		return fmt.Errorf("%s is empty (it would fire every minute)", key)
	}
	for k, v := range d {
		r, ok := calendarKeys[k]
		if !ok {
			return fmt.Errorf("%s has a %s field; launchd.plist(5) knows Minute, Hour, Day, Weekday and Month", key, k)
		}
		n, ok := asInt(v)
		if !ok {
			return fmt.Errorf("%s.%s is a %T, launchd.plist(5) wants an integer", key, k, v)
		}
		if n < int64(r[0]) || n > int64(r[1]) {
			return fmt.Errorf("%s.%s = %d is outside %d..%d", key, k, n, r[0], r[1])
		}
	}
	return nil
}

// asInt reads an <integer> as howett.net/plist decodes it into an interface.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case uint64:
		if n > 1<<62 {
			return 0, false
		}
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
