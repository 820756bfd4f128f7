package jmva

import "encoding/xml"

// The JMVA document: model > description, parameters (classes, stations,
// ReferenceStation), algParams, whatIf.

type model struct {
	XMLName     xml.Name `xml:"model"`
	XSI         string   `xml:"xmlns:xsi,attr,omitempty"`
	Schema      string   `xml:"xsi:noNamespaceSchemaLocation,attr,omitempty"`
	Description struct {
		Text string `xml:",cdata"`
	} `xml:"description"`
	Parameters parameters `xml:"parameters"`
	AlgParams  struct {
		AlgType algType `xml:"algType"`
		Compare struct {
			Value bool `xml:"value,attr"`
		} `xml:"compareAlgs"`
	} `xml:"algParams"`
	WhatIf *whatIf `xml:"whatIf,omitempty"`
}

type parameters struct {
	Classes struct {
		Number int         `xml:"number,attr"`
		Open   []openClass `xml:"openclass"`
	} `xml:"classes"`
	Stations struct {
		Number int       `xml:"number,attr"`
		LI     []station `xml:"listation"`
	} `xml:"stations"`
	Ref struct {
		Number  int        `xml:"number,attr"`
		Classes []refClass `xml:"Class"`
	} `xml:"ReferenceStation"`
}

type openClass struct {
	Name string `xml:"name,attr"`
	Rate string `xml:"rate,attr"`
}

// station is a load-independent station (listation).
type station struct {
	Name         string     `xml:"name,attr"`
	Servers      int        `xml:"servers,attr"`
	ServiceTimes []perClass `xml:"servicetimes>servicetime"`
	Visits       []perClass `xml:"visits>visit"`
}

type perClass struct {
	Class string `xml:"customerclass,attr"`
	Value string `xml:",chardata"`
}

type refClass struct {
	Name       string `xml:"name,attr"`
	RefStation string `xml:"refStation,attr"`
}

type algType struct {
	Name       string `xml:"name,attr"`
	Tolerance  string `xml:"tolerance,attr"`
	MaxSamples int    `xml:"maxSamples,attr"`
}

type whatIf struct {
	Class  string `xml:"className,attr,omitempty"`
	Type   string `xml:"type,attr"`
	Values string `xml:"values,attr"`
}
