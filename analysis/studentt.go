package analysis

import "math"

// StudentT975 is the 0.975 quantile of Student's t distribution with df
// degrees of freedom: the factor of a two-sided 95% confidence interval.
func StudentT975(df int) float64 { return StudentTQuantile(0.975, float64(df)) }

// StudentTQuantile returns the p-quantile of Student's t distribution with
// df > 0 degrees of freedom. Up to df = 10⁴ it inverts the exact CDF (the
// regularized incomplete beta function) by bisection to full float64
// precision; beyond, the Cornish–Fisher expansion around the normal quantile
// (Abramowitz & Stegun 26.7.5), whose error there is below 10⁻¹⁵.
func StudentTQuantile(p, df float64) float64 {
	if !(p > 0 && p < 1) || !(df > 0) {
		return math.NaN()
	}
	if p == 0.5 {
		return 0
	}
	if p < 0.5 {
		return -StudentTQuantile(1-p, df)
	}
	if df > 1e4 {
		z := normalQuantile(p)
		z2 := z * z
		g1 := (z2 + 1) * z / 4
		g2 := ((5*z2+16)*z2 + 3) * z / 96
		g3 := (((3*z2+19)*z2+17)*z2 - 15) * z / 384
		g4 := ((((79*z2+776)*z2+1482)*z2-1920)*z2 - 945) * z / 92160
		return z + g1/df + g2/(df*df) + g3/(df*df*df) + g4/(df*df*df*df)
	}
	// Bracket, then bisect on the upper tail probability.
	tail := 1 - p
	lo, hi := 0.0, 1.0
	for studentTUpper(hi, df) > tail {
		lo, hi = hi, hi*2
		if hi > 1e300 {
			return math.Inf(1)
		}
	}
	for i := 0; i < 200 && hi-lo > 1e-15*hi; i++ {
		mid := (lo + hi) / 2
		if studentTUpper(mid, df) > tail {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// studentTUpper is P(T > t) for t ≥ 0: I_{df/(df+t²)}(df/2, 1/2) / 2.
func studentTUpper(t, df float64) float64 {
	return regIncBeta(df/2, 0.5, df/(df+t*t)) / 2
}

// normalQuantile is the standard normal p-quantile: math.Erfinv (good to
// ~10⁻¹²) polished by Newton steps on Φ(z) = erfc(−z/√2)/2 (good to 1 ulp).
func normalQuantile(p float64) float64 {
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	for range 3 {
		phi := math.Exp(-z*z/2) / math.Sqrt(2*math.Pi)
		z -= (math.Erfc(-z/math.Sqrt2)/2 - p) / phi
	}
	return z
}

// regIncBeta is the regularized incomplete beta function I_x(a, b),
// evaluated by its continued fraction (modified Lentz), on the side of
// the symmetry I_x(a,b) = 1 − I_{1−x}(b,a) where the fraction converges fast.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

// betaCF evaluates the continued fraction of the incomplete beta function
// by the modified Lentz method (Numerical Recipes' betacf): two terms per
// iteration, the even and the odd one.
func betaCF(a, b, x float64) float64 {
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, 1/notTiny(1-qab*x/qap)
	h := d
	for m := 1; m <= 100000; m++ {
		fm := float64(m)
		m2 := 2 * fm
		var del float64
		c, d, del = lentzStep(fm*(b-fm)*x/((qam+m2)*(a+m2)), c, d)
		h *= del
		c, d, del = lentzStep(-(a+fm)*(qab+fm)*x/((a+m2)*(qap+m2)), c, d)
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return h
}

// lentzStep takes the next term aa into the running ratios c and d and
// returns them with the factor del that the fraction's value is multiplied
// by.
func lentzStep(aa, c, d float64) (float64, float64, float64) {
	d = 1 / notTiny(1+aa*d)
	c = notTiny(1 + aa/c)
	return c, d, d * c
}

// notTiny keeps a denominator of the Lentz method off zero.
func notTiny(v float64) float64 {
	const tiny = 1e-300
	if math.Abs(v) < tiny {
		return tiny
	}
	return v
}
