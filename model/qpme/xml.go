package qpme

import (
	"encoding/xml"
	"strconv"
)

// xsiNS is the XML Schema instance namespace: QPME tells the concrete type
// of a place, colour reference, transition or meta-attribute by xsi:type.
const xsiNS = "http://www.w3.org/2001/XMLSchema-instance"

// node is one element of the document. The net is built as a tree of
// nodes rather than of typed structs because QPME's elements are
// polymorphic (xsi:type) and most attributes depend on the type.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Kids    []*node    `xml:",any"`
}

// el makes an element with attributes given as name, value pairs.
func el(name string, kv ...string) *node {
	n := &node{XMLName: xml.Name{Local: name}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.set(kv[i], kv[i+1])
	}
	return n
}

func (n *node) set(name, value string) *node {
	n.Attrs = append(n.Attrs, xml.Attr{Name: xml.Name{Local: name}, Value: value})
	return n
}

func (n *node) add(kids ...*node) *node {
	n.Kids = append(n.Kids, kids...)
	return n
}

// child returns the first child named name, creating it if there is none.
func (n *node) child(name string) *node {
	for _, k := range n.Kids {
		if k.XMLName.Local == name {
			return k
		}
	}
	k := el(name)
	n.add(k)
	return k
}

// num formats a number as QPME reads it (Java's Double.parseDouble).
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func itoa(v int) string { return strconv.Itoa(v) }
