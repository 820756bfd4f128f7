#!/usr/bin/env bash
# Debian's ActiveMQ 5 as /usr/bin/activemq runs it, minus the daemon
# handling: an in-memory store, STOMP on 127.0.0.1:61613 (admin/admin), its
# GC log in BASE/gc.log (-Xlog:gc:time, what `calibrate --gc-log` reads).
# Writes the configuration under BASE and prints the command that runs the
# broker in the foreground, one word per line (for mapfile).
#
#   scripts/activemq.sh BASE
set -euo pipefail
base=${1:?usage: activemq.sh BASE}
mkdir -p "$base/conf" "$base/data"
cat >"$base/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="brokertrace" useJmx="false"
      persistent="false" useShutdownHook="false" dataDirectory="$base/data">
    <plugins><simpleAuthenticationPlugin anonymousAccessAllowed="false"><users>
      <authenticationUser username="admin" password="admin" groups="users,admins"/>
    </users></simpleAuthenticationPlugin></plugins>
    <transportConnectors><transportConnector name="stomp" uri="stomp://127.0.0.1:61613"/></transportConnectors>
  </broker>
</beans>
XML
printf 'log4j.rootLogger=WARN, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\nlog4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n' >"$base/conf/log4j.properties"
printf '%s\n' /usr/bin/java -Xms128m -Xmx512m "-Xlog:gc:file=$base/gc.log:time" \
	-Djava.net.preferIPv4Stack=true --add-reads=java.xml=java.logging
for m in java.base/java.security java.base/java.net java.base/java.lang java.base/java.util java.naming/javax.naming.spi \
	java.rmi/sun.rmi.transport.tcp java.base/java.util.concurrent java.base/java.util.concurrent.atomic; do
	printf '%s\n' --add-opens "$m=ALL-UNNAMED"
done
printf '%s\n' "-Dactivemq.classpath=$base/conf" -Dactivemq.home=/usr/share/activemq "-Dactivemq.base=$base" \
	"-Dactivemq.conf=$base/conf" "-Dactivemq.data=$base/data" -jar /usr/share/activemq/bin/activemq.jar start \
	"xbean:file:$base/conf/activemq.xml"
