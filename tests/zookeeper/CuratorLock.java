// SPDX-License-Identifier: Apache-2.0
// Curator's InterProcessMutex on one lock path, for the interoperability
// tests (tests/zookeeper/zk_lock_test.cpp), run from source by the JDK's
// launcher with Debian's Curator on the class path:
//   java -cp CURATOR_JARS CuratorLock.java HOSTS LOCK_PATH
// Prints "held NODE DATA" once it holds the lock (its node and the data
// Curator wrote in it), releases when its standard input ends, then prints
// "released".
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryNTimes(3, 100));
        client.start();
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        mutex.acquire();
        Collection<String> nodes = mutex.getParticipantNodes();
        String node = nodes.iterator().next();
        String data = new String(client.getData().forPath(node), StandardCharsets.UTF_8);
        System.out.println("held " + node + " " + data);
        System.out.flush();
        while (System.in.read() >= 0) {
        }
        mutex.release();
        System.out.println("released");
        System.out.flush();
        client.close();
    }
}
